/* cbf/cbf.h: everything a plugin needs. */
#ifndef CBF_CBF_H
#define CBF_CBF_H
#include "cbf/error.h"
#include "cbf/log.h"
#include "cbf/params.h"
#include "cbf/buffer.h"
#include "cbf/port.h"
#include "cbf/node.h"
#include "cbf/control.h"
#include "cbf/plugin.h"
#include "cbf/gpu.h"
#endif
