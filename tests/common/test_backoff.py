import pytest

from common import backoff


@pytest.mark.parametrize(("failures", "ceiling"), [(1, 0.2), (2, 0.4), (5, 3.2), (11, 30.0), (5000, 30.0)])
def test_doubles_up_to_the_cap_with_jitter(failures: int, ceiling: float) -> None:
    delays = {backoff.delay(failures, base=0.2, cap=30.0) for _ in range(50)}
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(delays) > 1, "jittered: clients that failed together do not retry together"


@pytest.mark.parametrize(("failures", "exact"), [(1, 0.5), (2, 1.0), (5, 8.0), (50, 60.0), (10**6, 60.0)])
def test_without_jitter_the_schedule_is_exact(failures: int, exact: float) -> None:
    assert backoff.delay(failures, base=0.5, cap=60.0, jitter=False) == exact


@pytest.mark.parametrize("failures", [0, -3])
def test_no_delay_before_the_first_failure(failures: int) -> None:
    assert backoff.delay(failures, base=0.5, cap=60.0) == 0.0
