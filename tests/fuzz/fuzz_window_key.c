/*
 * fuzz_window_key.c - window store keys (lib/window): the decoder that
 * `kstreams query` runs over a store never crashes, and a key it accepts
 * encodes back to the same bytes with the same times.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "window/window_core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 1)
        return 0;
    size_t ntimes = data[0] % 3; /* plain, session (end, start), sliding */
    unsigned char key[KS_KEY_MAX + 1];
    size_t key_len = 0;
    int64_t times[2] = {0, 0};
    if (ks_win_key_decode(data + 1, len - 1, key, sizeof key, &key_len, times, ntimes) != 0)
        return 0;
    unsigned char back[2 * (KS_KEY_MAX + 1) + 64];
    size_t n = ks_win_key_encode(data[1], (ks_bytes){key, key_len}, times, ntimes, back,
                                 sizeof back);
    if (n != len - 1 || memcmp(back, data + 1, n) != 0) {
        fprintf(stderr, "a decoded window key of %zu bytes encodes to %zu other bytes\n",
                len - 1, n);
        abort();
    }
    return 0;
}
