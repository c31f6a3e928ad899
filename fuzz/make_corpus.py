#!/usr/bin/env python3
"""Writes the libFuzzer seed corpus fixtures/corpus/: one input per
variant and value family pair that matters, each starting with the two
8-byte draws that pick the variant and the family (harness/fuzz/gen.c:
pick_variant, then the family), followed by pseudo-random bytes.
Re-run after changing the variant table:  python3 fuzz/make_corpus.py"""
import os, random, re, struct

src = open(os.path.join(os.path.dirname(__file__), "..", "harness", "fuzz", "gen.c")).read()
table = re.findall(r'\{"([a-z0-9._/]+)", [^}]*, (\d+)\},', src)
families = re.search(r'family_names\[KVC_FAM_COUNT\] = \{(.*?)\};', src, re.S).group(1)
families = re.findall(r'"([a-z0-9_]+)"', families)
total = sum(int(w) for _, w in table)
out = os.path.join(os.path.dirname(__file__), "..", "fixtures", "corpus")
os.makedirs(out, exist_ok=True)
rng = random.Random(20261129)
start = 0
for index, (name, weight) in enumerate(table):
    for family in (0, index % len(families), len(families) - 1):
        data = struct.pack("<QQ", start + total * rng.randrange(1 << 20), family + len(families) * rng.randrange(1 << 20))
        data += bytes(rng.randrange(256) for _ in range(192))
        path = os.path.join(out, "%s-%s" % (name.replace("/", "_"), families[family]))
        open(path, "wb").write(data)
    start += int(weight)
print("wrote %d inputs to fixtures/corpus" % len(os.listdir(out)))
