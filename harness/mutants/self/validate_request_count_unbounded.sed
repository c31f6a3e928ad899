# file: common/validate.c
# bug: v4.compress bounds the block table's entries but not its request count, so 2^40 + 1 requests of no columns pass (SPEC.md 9.3; caught by the validator's field checks at the count bounds)
/TRY(check_count(a->num_requests, "num_requests", err));   \/\* SPEC.md 9.3/d
