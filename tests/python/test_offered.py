"""kvcmp fuzz --stage offered: a candidate that offers one stage gets
every case of the campaign, none skipped."""
import kvcmp

import candidates


def test_offered_stages_take_every_case(tmp_path):
    summary = kvcmp.fuzz(candidates.quant_insert_only, seed=3, cases=60, stages="offered", out=str(tmp_path / "a"), quiet=True)
    assert summary.ok and summary.cases == 60 and summary.skipped == 0, summary.output[-2000:]
    assert set(summary.per_variant) == {"v41.rope_quant_insert"}, summary.per_variant
    # Without it, the cases of the other stages are drawn and skipped.
    summary = kvcmp.fuzz(candidates.quant_insert_only, seed=3, cases=60, out=str(tmp_path / "b"), quiet=True)
    assert summary.ok and summary.skipped > 30, summary.output[-2000:]
