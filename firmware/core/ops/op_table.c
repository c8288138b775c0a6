/*
 * op_table.c - the stock op table: every operator of the core (snapuq_ops.h). An image built for
 * known models links its own table instead (SNAPUQ_OP_TABLE of their operators; firmware/Makefile
 * OPS=fit), and the other registrations drop out at link.
 */
#include "snapuq_ops.h"

SNAPUQ_OP_TABLE(SNAPUQ_OPS_ALL);
