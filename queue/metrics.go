package queue

import "time"

// Metrics receives the queue's measurements. Together with
// [Queue.Unfinished] it covers the workqueue_* families:
//
//	Added          workqueue_adds_total
//	Depth          workqueue_depth
//	Retried        workqueue_retries_total
//	Waited         workqueue_queue_duration_seconds
//	Worked         workqueue_work_duration_seconds
//	Unfinished     workqueue_unfinished_work_seconds and
//	               workqueue_longest_running_processor_seconds (polled)
//
// The queue calls these methods with its lock held, one call at a time per
// queue, so they must be quick and must not call back into the queue.
type Metrics interface {
	// Added is called when an add makes a key ready or, for a held key,
	// due again. Adds merged into a key that is already due are not
	// counted.
	Added()
	// Depth is called with the number of ready keys, of both bands,
	// whenever it changes.
	Depth(n int)
	// Retried is called for every AddRateLimited before the queue is shut
	// down.
	Retried()
	// Waited is called by Get with how long the key it returns waited
	// since it became ready.
	Waited(d time.Duration)
	// Worked is called by Done with how long the key was held.
	Worked(d time.Duration)
}
