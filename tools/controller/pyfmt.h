/* pyfmt.h: numbers and strings written as Python writes them, since
 * katsdpcontroller's names and sensor values are Python's text: a dsim's
 * task name carries its ADC rate as repr(float) does (sim.dsim000.1712000000.0),
 * and list-valued sensors (bls-ordering, input-labels) are str(list). */
#ifndef CBF_PYFMT_H
#define CBF_PYFMT_H

#include <stddef.h>

/* v as Python's repr(float): the shortest digits that read back as v,
 * plain for exponents -4 to 15 (with ".0" when whole), else 1e-05, 1.5e+16;
 * nan, inf, -inf. */
void cbf_python_float(double v, char *buf, size_t n);

#endif
