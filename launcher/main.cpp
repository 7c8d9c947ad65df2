#include <unistd.h>

#include "run.h"

int main(int argc, char** argv) { return tfboot::run(argc, argv, environ); }
