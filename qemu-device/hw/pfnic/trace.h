#include "trace/trace-hw_net_pfnic.h"
