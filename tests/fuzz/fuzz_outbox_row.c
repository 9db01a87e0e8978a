/*
 * fuzz_outbox_row.c - the outbox's on-disk row decoder (engine/outbox) on
 * any bytes, as a damaged or hostile state directory would hold them: it
 * never crashes, and a row it accepts encodes back to the same bytes (but
 * for the header's two pad bytes, which the decoder ignores).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    ks_outbox_event ev;
    char err[512];
    if (ks_outbox_row_decode("fuzz", data, len, &ev, err, sizeof err) != 0) {
        ks_outbox_event_clear(&ev);
        return 0;
    }
    size_t back_len = 0;
    void *back = ks_outbox_row_encode(&ev, &back_len);
    unsigned char *want = malloc(len);
    if (!want)
        abort();
    memcpy(want, data, len);
    memset(want + offsetof(ks_outbox_row_hdr, pad), 0, sizeof ((ks_outbox_row_hdr *)0)->pad);
    int same = back && back_len == len && memcmp(back, want, len) == 0;
    free(want);
    if (!same) {
        fprintf(stderr, "a decoded row of %zu bytes encodes to %zu other bytes\n", len,
                back_len);
        abort();
    }
    free(back);
    ks_outbox_event_clear(&ev);
    return 0;
}
