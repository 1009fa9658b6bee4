"""Session.time_left(): the time left until the session's local lease deadline."""

import time
import urllib.request

import consul_baton as baton
def _destroy_from_outside(addr, sid):
    req = urllib.request.Request(f"http://{addr}/v1/session/destroy/{sid}", method="PUT", data=b"")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200


def test_time_left_is_within_the_ttl_and_zero_once_lost(client, devserver):
    s = client.create_session(ttl=10, lock_delay=0)
    left = s.time_left()
    assert isinstance(left, float)
    assert 0 < left <= 10
    _destroy_from_outside(devserver, s.id)
    assert s.wait_lost(timeout=10) == "invalidated"
    assert s.time_left() == 0.0


def test_renewals_move_the_deadline_forward(client, session_ttl):
    ttl = session_ttl(1)  # 10 s on a real Consul: the first renewal then comes after about 3.3 s
    s = client.create_session(ttl=ttl, lock_delay=0)
    # Renewed about every TTL/3 (±10 %): a later reading is larger than an earlier one.
    prev, moved, end = s.time_left(), False, time.monotonic() + max(5.0, 0.6 * ttl)
    while not moved and time.monotonic() < end:
        time.sleep(0.005)
        left = s.time_left()
        moved, prev = left > prev, left
    assert moved
    assert s.is_valid()
    s.destroy()


def test_no_ttl_means_no_deadline_and_destroy_means_none_left(client):
    s = client.create_session(ttl=None, lock_delay=0)  # no TTL only when asked for
    assert s.time_left() is None
    s.destroy()
    assert s.time_left() == 0.0


def test_the_default_session_of_a_lock_has_a_deadline(client):
    lock = client.lock("py/time-left")
    assert lock.acquire(timeout=5)
    left = client.default_session().time_left()
    assert left is not None and 0 < left <= 15
    lock.release()
