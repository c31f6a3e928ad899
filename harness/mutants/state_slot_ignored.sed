# file: reference/v4_compress.c
# bug: a closing token is compressed although its state slot is negative (vLLM's CPU port checks only the kv slot)
s/if (a->slot_mapping\[t\] < 0 || a->kv_slot_mapping\[t\] < 0) continue;/if (a->kv_slot_mapping[t] < 0) continue;/
