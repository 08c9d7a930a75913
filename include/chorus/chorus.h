// chorus: collective communication among N ranks. Umbrella header.
#pragma once

#include <chorus/communicator.h>
#include <chorus/error.h>
#include <chorus/init.h>
#include <chorus/testing.h>
#include <chorus/types.h>
