/* snapuq_schedule.h - memory-aware operator order for the arena planner (internal to the core). */
#ifndef SNAPUQ_SCHEDULE_H
#define SNAPUQ_SCHEDULE_H

#include "snapuq_runtime.h"

/* Fill md->sched with the execution order (a greedy, peak-lowering topological order, or the
 * flatbuffer order when that is not worse) and rewrite the activations' first/last use in schedule
 * positions. Needs parsed operators, tensors, inputs and outputs; called by the planner. */
void snapuq_schedule_ops(snapuq_model_t *md);

#endif
