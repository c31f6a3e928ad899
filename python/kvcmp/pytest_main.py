"""The wheel's ``pytest`` script: pytest run by the interpreter the wheel
is installed for.

In a venv made with ``--system-site-packages`` that borrows the system's
pytest, the system's ``pytest`` script runs the system interpreter, which
does not see the venv's packages: a bare ``pytest`` in the activated venv
would not load kvcmp's plugin (the pytest11 entry point "kvcmp",
kvcmp.pytest_plugin), while ``python -m pytest`` does.  The wheel puts
this ``pytest`` in the venv's bin, so both behave alike."""


def console_main():
    import pytest
    main = getattr(pytest, "console_main", None)
    return main() if main is not None else pytest.main()
