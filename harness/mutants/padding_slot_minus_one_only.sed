# file: reference/v41_save_compress_norm.c
# bug: only slot -1 is taken as padding (SPEC.md 5.1: any negative slot is); a -2 or INT64_MIN token is pooled and its latent written
s/if (a->slot_mapping\[t\] < 0 || !s->v41_norm_closes/if (a->slot_mapping[t] == -1 || !s->v41_norm_closes/
