"""kvcmp's pytest plugin (registered as the pytest11 entry point "kvcmp";
without an install, ``pytest -p kvcmp.pytest_plugin``).

* ``kvcmp_fuzz(candidate, **options)``: a fixture that runs a campaign of
  the engine (kvcmp.fuzz) with its output under the test's ``tmp_path``
  and fails the test with each failure signature, its smallest saved case
  and its __REPRO lines.
* ``@pytest.mark.kvcmp_candidate(candidate)`` with a ``kvcmp_stage``
  argument: the test runs once per stage the candidate offers (its
  ``stages`` attribute, else every stage).  A candidate that offers no
  stage, or cannot be loaded, is a collection error, never a skip.

The verdicts are the command line's: a test passes only when the
campaign's process exited 0 and its summary file says every case asked
was compared and none failed.  A candidate named by a string is loaded in
interpreters of its own, never in the pytest process.
"""
import pytest

# kvcmp (and its library) loads when a test asks for it, not at every
# pytest start of an environment that has the wheel installed.


def pytest_configure(config):
    config.addinivalue_line("markers", "kvcmp_candidate(candidate): parametrise kvcmp_stage over the stages the candidate offers")


def pytest_generate_tests(metafunc):
    if "kvcmp_stage" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("kvcmp_candidate")
    if marker is None or not marker.args:
        raise pytest.UsageError("%s takes kvcmp_stage: mark it @pytest.mark.kvcmp_candidate(candidate)" % metafunc.function.__name__)
    from .fuzzing import stages_of
    try:
        stages = stages_of(marker.args[0])
    except ValueError as e:
        pytest.fail("%s: %s" % (metafunc.function.__name__, e), pytrace=False)
    if not stages:
        # As kvcmp fuzz exits 2 for it: nothing to test is an error, not a skip.
        pytest.fail("%s: the candidate %s offers no stage: nothing to test (list its stages in FUNCTION.stages)" % (
            metafunc.function.__name__, marker.args[0]), pytrace=False)
    metafunc.parametrize("kvcmp_stage", stages)


@pytest.fixture
def kvcmp_fuzz(tmp_path):
    def run(candidate, **options):
        from .fuzzing import fuzz, passed
        options.setdefault("out", str(tmp_path / "kvcmp-out"))
        options.setdefault("quiet", True)
        summary = fuzz(candidate, **options)
        if not passed(summary):
            pytest.fail("the candidate differs from the kvcmp reference:\n%s\n(cases and summary under %s)" % (
                summary.report(), options["out"]), pytrace=False)
        return summary
    return run
