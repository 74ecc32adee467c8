// Fixture: a policy reaching a study private header by a relative path (must be refused).
#include "../study/internal.hpp"
