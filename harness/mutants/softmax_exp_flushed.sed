# file: reference/steps.c
# bug: exp weights below 2^-126 flushed to zero (an FTZ kernel); only visible where e * kv is not negligible, kv ~ 1/e
s/float e = kvc_expf_cr(window_score\[w\] - m);/float e = kvc_expf_cr(window_score[w] - m); if (e < 0x1p-126f) e = 0.0f;/
