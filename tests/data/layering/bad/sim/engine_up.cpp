// Fixture: the engine reaching up into the study layer (must be refused).
#include "sparsp/sim.hpp"
#include "sparsp/study.hpp"
