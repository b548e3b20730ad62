// Package queue is a work queue of keys (usually "namespace/name") that sits
// between the watch and the reconciler.
//
// A watch calls [Queue.Add] for every object that changed; workers call
// [Queue.Get], reconcile the key, and call [Queue.Done]. A [Runner] does the
// worker side: it starts N workers, calls a function for each key and acts
// on its result. The queue's guarantees are what let a reconciler stay
// simple:
//
//   - Dedup. A key added many times before a worker takes it is processed
//     once.
//   - Stingy. No key is held by two workers at once. A key added while a
//     worker holds it is queued again only when that worker calls
//     [Queue.Done].
//   - Fair. Keys come out in the order they became ready: the order of the
//     Adds that made them ready, the deadline order for delayed adds, or the
//     order of the Done calls for keys re-added while held. That order
//     holds within each of two bands.
//   - Live first. [Queue.Add] queues a key in the live band;
//     [Queue.AddBacklog], meant for the keys of a list of existing
//     objects, queues it in the backlog band. Get hands out the live keys
//     before the backlog keys ready, except that while both bands have
//     ready keys, at least one Get in 8 takes the oldest backlog key, so
//     that a steady stream of live keys cannot starve the backlog. A
//     backlog key added live moves up to the live band, in the order of
//     that Add; a live key added to the backlog stays live; a held key
//     re-added comes back at Done in the higher band it was re-added in.
//     A delayed or rate-limited add that comes due, being a retry, is
//     live.
//   - Delayed adds. [Queue.AddAfter] makes a key ready after a delay. A key
//     has at most one pending deadline: an earlier deadline replaces a later
//     one, a later one is ignored, and an immediate [Queue.Add] (or a key
//     that is already ready) cancels the pending deadline.
//   - Backoff. [Queue.AddRateLimited] asks the queue's [RateLimiter] how
//     long to wait. The default combines per-key exponential backoff
//     ([ExponentialBackoff]: 5ms doubling up to 1000s) with an overall
//     token bucket ([TokenBucket]: 10 per second, burst 100) and waits for
//     the longer of the two ([MaxOf]). [Queue.Forget] resets a key's count
//     and [Queue.NumRequeues] reports it. Limiters are small, safe for
//     concurrent use and testable without a queue: they are told the time.
//   - Shutdown. [Queue.ShutDown] stops new work at once: every Get, waiting
//     or not, returns shutdown=true, keys not yet handed out are dropped and
//     later adds are ignored. [Queue.ShutDownWithDrain] does the same and
//     then waits until every held key is Done. The queue keeps no
//     goroutine of its own; delayed adds share one timer, stopped on
//     shutdown.
//   - Bounded. The queue remembers a key only while it is ready, held or
//     delayed, so memory grows with the number of distinct keys in flight,
//     never with the number of adds.
//
// The queue measures itself through an optional [Metrics] hook and
// [Queue.Unfinished]; together they cover the familiar workqueue_* families
// (depth, adds, retries, queue and work duration, unfinished work and the
// longest running processor) without depending on any metrics library.
//
// Time comes from a [k8sapi.Clock]; nil means the real clock. Tests use
// testing/synctest or a fake Clock.
package queue
