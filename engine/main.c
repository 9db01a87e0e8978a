/* main.c - the kstreams command line. */
#include <stdio.h>
int main(void) { puts("kstreams"); return 0; }
