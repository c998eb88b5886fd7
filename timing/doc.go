// Package timing prices forward passes: a Model turns a Batch (the plain description of one pass) into a
// Cost (how long its prefill and decode parts take).
//
// Schedulers build Batches and know nothing of milliseconds; models know nothing of queues. Start with
// Batch and Model; Fixed and Polynomial are the reference's models (dynamo-mocker.md §6), and Scaled
// applies --speedup-ratio and --decode-speedup-ratio to any model.
package timing
