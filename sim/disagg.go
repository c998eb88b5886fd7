package sim

import (
	"errors"

	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
)

// prefilled starts a request's handoff once its prefill worker has computed the prompt: the prefill
// router is done with it, the decode router picks its decode worker, which reserves room for the KV.
func (r *runner) prefilled(req *request) error {
	r.stages.prefill.Add(ms(r.now - req.arrived))
	r.ingress.router.PrefillDone(req.id)
	r.ingress.router.Finished(req.id)
	req.prefilled = true
	if len(r.o.Failures) > 0 && r.poolDead(r.decode) {
		req.ingress.eng.Release(req.rank, req.id)
		r.wake(req.ingress)
		r.col.Failed(int(req.id), r.now, "no decode worker left")
		return r.requestEnded(req)
	}
	d, queued := r.decode.router.Route(router.Request{ID: req.id, Blocks: req.seq.Blocks(), PromptTokens: req.seq.Len()})
	if queued {
		return nil // drained when the decode pool frees capacity
	}
	return r.reserve(req, d)
}

// reserve asks the chosen decode worker for room, behind any request already waiting there.
func (r *runner) reserve(req *request, d router.Decision) error {
	w := r.decode.workers[d.Target.Worker]
	req.decode, req.drank = w, d.Target.Rank
	if r.o.Observer != nil {
		r.o.Observer.Routed(r.now, req.id, r.decode.name, w.serial, d.Target.Rank)
	}
	if len(w.pending) == 0 {
		if ok, err := r.tryReserve(w, req); ok || err != nil {
			return err
		}
	}
	w.pending = append(w.pending, req)
	return nil
}

// retryReservations gives a decode worker's waiting handoffs the room its last pass freed, in order.
func (r *runner) retryReservations(w *worker) error {
	for len(w.pending) > 0 {
		ok, err := r.tryReserve(w, w.pending[0])
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		w.pending[0] = nil
		w.pending = w.pending[1:]
	}
	return nil
}

// tryReserve reserves the request's KV room on its decode worker and starts the transfer of what that
// worker lacks; false means no room yet.
func (r *runner) tryReserve(w *worker, req *request) (bool, error) {
	missing, ok, err := w.eng.Reserve(&sched.Request{ID: req.id, Seq: req.seq, MaxTokens: req.turn.OutputLen,
		OutputTokens: req.turn.OutputTokenIDs, Rank: req.drank, LoRA: req.turn.LoRA})
	if err != nil {
		var rej *sched.RejectError
		if !errors.As(err, &rej) {
			return false, err
		}
		req.ingress.eng.Release(req.rank, req.id)
		r.wake(req.ingress)
		r.decode.router.Finished(req.id)
		r.col.Rejected(int(req.id), r.now, rej.Reason)
		return true, r.requestEnded(req)
	}
	if !ok {
		return false, nil
	}
	req.transferFrom = r.now
	r.network.Start(r.now, req.id, int(req.ingress.serial), int(w.serial), r.o.Transfer.Bytes(missing, req.seq.Len()))
	r.scheduleTransfer()
	return true, nil
}

// scheduleTransfer (re)schedules the next transfer completion; an earlier schedule goes stale.
func (r *runner) scheduleTransfer() {
	at, ok := r.network.Next()
	if !ok {
		return
	}
	r.transferGen++
	r.timeline.push(event{at: at, phase: phaseTransfer, key: r.transferGen})
}

// transfersDone completes the transfers due now: the prefill worker frees the KV it held, the decode
// worker takes the request.
func (r *runner) transfersDone() error {
	r.doneIDs = r.network.Done(r.now, r.doneIDs[:0])
	for _, id := range r.doneIDs {
		req := r.req(id)
		r.stages.transfer.Add(ms(r.now - req.transferFrom))
		if r.o.Observer != nil {
			r.o.Observer.Transferred(id, req.transferFrom, r.now)
		}
		req.ingress.eng.Release(req.rank, id)
		req.activated = r.now
		req.onDecode = true
		req.decode.eng.Activate(req.drank, id)
		r.wake(req.ingress)
		r.wake(req.decode)
	}
	r.scheduleTransfer()
	return nil
}
