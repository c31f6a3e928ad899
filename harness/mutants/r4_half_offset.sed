# file: reference/steps.c
# bug: R=4 reads the second half for the previous group, the first half for the current one
s/(ratio == 4 \&\& w >= ratio) ? head_dim : 0/(ratio == 4 \&\& w < ratio) ? head_dim : 0/
