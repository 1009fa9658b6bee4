// A C++17 program built outside the tree against an installed baton, with
// `pkg-config --cflags --libs baton` only (`make test-c` builds and runs it).
#include <baton.h>

#include <cstdio>
#include <cstring>
#include <memory>

int main() {
    baton_client *raw = nullptr;
    baton_client_options o = baton_client_options_default();
    o.address = "127.0.0.1:1";
    if (baton_client_new(&o, &raw) != BATON_OK) return 1;
    std::unique_ptr<baton_client, decltype(&baton_client_free)> client(raw, &baton_client_free);
    if (std::strcmp(baton_version(), BATON_VERSION_STRING) != 0) return 1;
    // Handles fit RAII; creating a lock makes no request (no server is needed here).
    baton_lock *lraw = nullptr;
    if (baton_lock_new(client.get(), "consumer/lock", nullptr, &lraw) != BATON_OK) return 1;
    std::unique_ptr<baton_lock, decltype(&baton_lock_free)> lock(lraw, &baton_lock_free);
    if (baton_lock_is_held(lock.get()) || baton_lock_release(lock.get()) != BATON_NOT_HELD) return 1;
    std::printf("baton %s (%d), %s\n", baton_version(), BATON_VERSION_NUMBER,
                baton_result_name(baton_client_close(client.get(), 1000)));
    return 0;
}
