/*
 * fuzz_yaml.c - the pipeline loader (engine/config) on any text: it never
 * crashes or leaks, a text it accepts is one the YAML tree accepts too,
 * and every refusal names the file ("fuzz.yaml:" first), as `kstreams
 * check` promises (FILE:LINE:COL where the text has a position).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/yaml_tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char err[2048] = "";
    ks_pipeline *p = NULL;
    int rc = ks_pipeline_parse("fuzz.yaml", (const char *)data, len, &p, err, sizeof err);
    if (rc == 0) {
        ks_ydoc doc;
        ks_yerr yerr;
        memset(&doc, 0, sizeof doc);
        if (ks_ydoc_parse((const char *)data, len, &doc, &yerr) != 0) {
            fprintf(stderr, "the pipeline loaded but the YAML tree refuses the text\n");
            abort();
        }
        ks_ydoc_free(&doc);
        ks_pipeline_free(p);
        return 0;
    }
    if (p != NULL || strncmp(err, "fuzz.yaml", 9) != 0) {
        fprintf(stderr, "refusal without the file name (or with a pipeline): \"%s\"\n", err);
        abort();
    }
    return 0;
}
