"""What a newcomer still hit (issue 43), the Python parts of the client: an address carrying
Consul's API path (a key that exists read as missing), errors that named only the API path,
and misspelt keywords that got Python's bare TypeError with no hint."""

import asyncio
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # noqa: F401  (baton.aio)


# --- item 6: an address with the API path is refused, errors name the full URL ---------------


@pytest.mark.parametrize("path", ["/v1", "/v1/", "/v1/kv"])
def test_an_address_ending_in_the_api_path_is_refused(devserver, path):
    with pytest.raises(baton.InvalidArgumentError) as e:
        baton.Client(f"http://{devserver}{path}")
    text = str(e.value)
    assert "carries the API path" in text, text
    assert f'"http://{devserver}"' in text, text


def test_a_proxy_prefix_is_allowed_and_errors_name_the_full_url(devserver):
    with baton.Client(f"http://{devserver}/consul") as client:
        with pytest.raises(baton.NotFoundError) as e:
            client.kv_put(f"py-newcomer3/{uuid.uuid4()}", b"v")
        assert e.value.endpoint.startswith("PUT /v1/kv/py-newcomer3/"), e.value.endpoint
        assert e.value.url.startswith(f"http://{devserver}/consul/v1/kv/py-newcomer3/"), e.value.url
        assert str(e.value).startswith(f"PUT http://{devserver}/consul/v1/kv/"), str(e.value)
        with pytest.raises(baton.BatonError) as e:
            client.lock(f"py-newcomer3/{uuid.uuid4()}").acquire(timeout=5)
        assert f"http://{devserver}/consul/v1/session/create" in str(e.value), str(e.value)


# --- item 7: near misses get the same words as Node's -------------------------------------------


def test_a_misspelt_client_keyword_names_the_near_miss(devserver):
    with pytest.raises(TypeError) as e:
        baton.Client(adress=devserver)
    assert str(e.value).startswith('unknown Client option "adress" (did you mean address?) (known: address, '), str(e.value)


def test_misspelt_recipe_and_session_keywords_name_the_near_miss(client):
    cases = [
        (lambda: client.lock("k", vaule=b"x"), 'unknown lock option "vaule" (did you mean value?)'),
        (lambda: client.semaphore("p", 2, sesion=None), 'unknown semaphore option "sesion" (did you mean session?)'),
        (lambda: client.election("k", flag=0), 'unknown election option "flag" (did you mean flags?)'),
        (lambda: client.create_session(tll=10), 'unknown create_session option "tll" (did you mean ttl?)'),
        (lambda: baton.Client(default_session={"lock_dealy": 1}), 'unknown default_session option "lock_dealy" (did you mean lock_delay?)'),
        # Far from every name: no guess, but the list of known ones.
        (lambda: client.lock("k", colour="red"), 'unknown lock option "colour" (known: value, session)'),
    ]
    for call, words in cases:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value).startswith(words), (words, str(e.value))


def test_the_asyncio_client_gives_the_same_words(devserver):
    async def main():
        async with baton.aio.Client(devserver) as client:
            with pytest.raises(TypeError) as e:
                client.lock("k", vaule=b"x")
            assert str(e.value).startswith('unknown lock option "vaule" (did you mean value?)'), str(e.value)
            with pytest.raises(TypeError) as e:
                await client.create_session(lock_delya=1)
            assert str(e.value).startswith('unknown create_session option "lock_delya" (did you mean lock_delay?)'), str(e.value)

    asyncio.run(main())


def test_a_duration_keyword_with_a_unit_says_durations_are_seconds(client):
    with pytest.raises(TypeError) as e:
        client.create_session(ttlMs=10)
    assert str(e.value).startswith('unknown create_session option "ttlMs" (did you mean ttl? durations are in seconds)'), str(e.value)
