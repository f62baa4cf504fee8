// posenc/posenc.h: the umbrella header of the public API.
#pragma once

#include "posenc/context.h"
#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "posenc/sinusoidal.h"
#include "posenc/tensor.h"
