/*
 * json_valid_bench.c - the json serde's per-record check, before and after:
 * jansson's json_loadb(JSON_DECODE_ANY) + json_decref (what serde.c did)
 * vs ks_json_valid (lib/json/json_valid.h, what it does now), on records
 * like the benchmark's: ~100-byte page-view objects and ~2 KB nested
 * documents, separately and as a mix (9 small : 1 large). Prints
 * records/s and MB/s of each and their ratio, measured in the same run.
 *
 *   make -C BUILD/engine json_valid_bench && BUILD/engine/json_valid_bench [SECONDS]
 *
 * SECONDS (default 0.5) is the time spent per measurement; each is taken
 * 3 times and the best kept. Exits 1 if the two ever disagree on a record.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json/json_valid.h"

#define NREC 4096

struct rec {
    char *data;
    size_t len;
};

static unsigned long long rng = 0x9e3779b97f4a7c15ULL;

static unsigned rnd(unsigned n)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (unsigned)((rng * 0x2545F4914F6CDD1DULL) >> 33) % n;
}

static const char *const pages[] = {"/", "/products/42", "/cart", "/checkout/step-2",
                                    "/search?q=caf%C3%A9", "/blog/2024/kafka-streams-in-c"};

/* {"user":"u-48213","page":"/cart","ts":1718000123456,"dwell_ms":5230,
 *  "mobile":true,"ref":null} : 100 bytes or so */
static size_t page_view(char *buf, size_t cap)
{
    int n = snprintf(buf, cap,
                     "{\"user\":\"u-%05u\",\"page\":\"%s\",\"ts\":%llu,\"dwell_ms\":%u,"
                     "\"mobile\":%s,\"ref\":null}",
                     rnd(100000), pages[rnd(6)], 1718000000000ULL + rnd(1000000000), rnd(60000),
                     rnd(2) ? "true" : "false");
    return (size_t)n;
}

/* an order with a customer, lines and history: about 2 KB, 5 levels deep,
 * strings with escapes and non-ASCII text, integers and reals */
static size_t order(char *buf, size_t cap)
{
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__)
    PUT("{\"order_id\":\"o-%08u\",\"created\":\"2024-06-%02uT10:%02u:00Z\",\"customer\":{",
        rnd(100000000), 1 + rnd(28), rnd(60));
    PUT("\"id\":%u,\"name\":\"Zo\\u00eb M\xc3\xbcller \\\"ZM\\\"\",\"email\":\"zoe%u@example.com\",",
        rnd(1000000), rnd(1000));
    PUT("\"address\":{\"street\":\"%u Rue de la Paix\",\"city\":\"Paris\",\"zip\":\"750%02u\","
        "\"geo\":{\"lat\":48.8%05u,\"lon\":2.3%05u}},\"tags\":[\"vip\",\"newsletter\",\"\xe6\x9d\xb1\"]},",
        rnd(200), rnd(20), rnd(100000), rnd(100000));
    PUT("\"lines\":[");
    for (int i = 0; i < 8; i++)
        PUT("%s{\"sku\":\"SKU-%06u\",\"title\":\"Item %u \\/ size M\",\"qty\":%u,"
            "\"unit_price\":%u.%02u,\"discount\":%s,\"attrs\":{\"color\":\"blue\",\"w\":%u}}",
            i ? "," : "", rnd(1000000), rnd(100), 1 + rnd(5), rnd(500), rnd(100),
            rnd(3) ? "null" : "0.15", rnd(1000));
    PUT("],\"history\":[");
    for (int i = 0; i < 6; i++)
        PUT("%s{\"at\":%llu,\"state\":\"%s\",\"note\":\"line one\\nline two\\t(%u)\"}", i ? "," : "",
            1718000000000ULL + rnd(1000000000), rnd(2) ? "paid" : "shipped", rnd(1000));
    PUT("],\"total\":%u.%02u,\"currency\":\"EUR\",\"gift\":false,\"coupon\":null}", rnd(5000),
        rnd(100));
#undef PUT
    return n;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile int sink;

static int via_jansson(const char *d, size_t n)
{
    json_error_t err;
    json_t *j = json_loadb(d, n, JSON_DECODE_ANY, &err);
    json_decref(j);
    return j != NULL;
}

static int via_validator(const char *d, size_t n)
{
    return ks_json_valid(d, n);
}

/* records/s of check() over recs[idx[0..n)], best of 3 runs of `secs` */
static double rate(int (*check)(const char *, size_t), const struct rec *recs,
                   const unsigned *idx, size_t n, double secs)
{
    double best = 0;
    for (int run = 0; run < 3; run++) {
        size_t done = 0;
        int ok = 0;
        double t0 = now(), t;
        do {
            for (size_t i = 0; i < n; i++)
                ok += check(recs[idx[i]].data, recs[idx[i]].len);
            done += n;
        } while ((t = now() - t0) < secs);
        sink = ok;
        if (done / t > best)
            best = (double)done / t;
    }
    return best;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.5;
    static struct rec recs[NREC];
    static unsigned small[NREC], large[NREC], mix[NREC];
    size_t ns = 0, nl = 0, bytes_s = 0, bytes_l = 0;
    char buf[8192];
    for (size_t i = 0; i < NREC; i++) {
        int is_large = i % 10 == 9; /* 9 small : 1 large */
        size_t n = is_large ? order(buf, sizeof buf) : page_view(buf, sizeof buf);
        recs[i].data = malloc(n);
        if (!recs[i].data)
            return 2;
        memcpy(recs[i].data, buf, n);
        recs[i].len = n;
        if (via_jansson(buf, n) != 1 || ks_json_valid(recs[i].data, n) != 1) {
            fprintf(stderr, "record %zu: jansson %d, ks_json_valid %d\n", i, via_jansson(buf, n),
                    ks_json_valid(recs[i].data, n));
            return 1;
        }
        if (is_large) {
            large[nl++] = (unsigned)i;
            bytes_l += n;
        } else {
            small[ns++] = (unsigned)i;
            bytes_s += n;
        }
        mix[i] = (unsigned)i;
    }
    struct {
        const char *name;
        const unsigned *idx;
        size_t n;
        double avg;
    } sets[] = {
        {"page views", small, ns, (double)bytes_s / (double)ns},
        {"orders", large, nl, (double)bytes_l / (double)nl},
        {"mix 9:1", mix, NREC, (double)(bytes_s + bytes_l) / NREC},
    };
    printf("%-11s %9s  %15s %9s  %15s %9s  %7s\n", "records", "avg bytes", "jansson rec/s", "MB/s",
           "validator rec/s", "MB/s", "ratio");
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        double j = rate(via_jansson, recs, sets[k].idx, sets[k].n, secs);
        double v = rate(via_validator, recs, sets[k].idx, sets[k].n, secs);
        printf("%-11s %9.0f  %15.0f %9.1f  %15.0f %9.1f  %6.1fx\n", sets[k].name, sets[k].avg, j,
               j * sets[k].avg / 1e6, v, v * sets[k].avg / 1e6, v / j);
    }
    for (size_t i = 0; i < NREC; i++)
        free(recs[i].data);
    return 0;
}
