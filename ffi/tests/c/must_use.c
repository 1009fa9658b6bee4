/* Must NOT compile with -Werror: an ignored acquire result is a bug (BATON_MUST_USE).
 * `make test-c` fails if this compiles. */
#include "baton.h"
void ignore(const baton_lock *l) { baton_lock_acquire(l, 0, NULL); }
