#include <unistd.h>

#include "flow/run.h"

int main(int argc, char** argv) { return tfboot::run(argc, argv, environ); }
