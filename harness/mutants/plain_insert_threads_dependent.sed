# file: reference/v41_rope_plain_insert.c
# bug: with more than one OpenMP thread the first cache byte is flipped (a result that depends on the thread count)
s/^int ref_v41_rope_plain_insert(/int omp_get_max_threads(void);\nint ref_v41_rope_plain_insert(/
s/^    return KVC_OK;$/    if (omp_get_max_threads() > 1) ((uint8_t *)a->kv_cache.data)[0] ^= 1;\n    return KVC_OK;/
