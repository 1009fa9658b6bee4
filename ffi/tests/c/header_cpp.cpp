// Compiles the header alone as C++17 (`make test-c` uses -Wall -Wextra -Werror).
#include "baton.h"
int main() { return baton_result_name(BATON_OK)[0] == 'B' ? 0 : 1; }
