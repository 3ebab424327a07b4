"""The oracle's tests: the lab server of test_oracle_lab.py starts with the package's first test
(where the session runs that lab test), so that it boots while the tests before it run
(heads/, the EAGLE3 oracle's lab test on the session's shared server, the unit tests): on 2
cores one inductor boot is about a minute."""

from __future__ import annotations

import pytest

from tests.conftest import start_oracle_lab, will_run


@pytest.fixture(scope="package", autouse=True)
def oracle_lab_server_ahead(request: pytest.FixtureRequest) -> None:
    if will_run(request, "tests/oracle/test_oracle_lab.py"):
        start_oracle_lab(request.getfixturevalue("lab_pool"))
