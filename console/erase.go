package console

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
)

// Erasing one ended instance (a data subject's request), admins only: a
// confirmation page and a form, as the operator actions are, that leads
// to the instances list once the instance is gone.

// eraseHref is an instance's erasure confirmation.
func eraseHref(id uuid.UUID) string { return instanceHref(id) + "/" + string(engine.ActionErase) }

// instanceEnded reports whether an instance may be erased.
func instanceEnded(status string) bool {
	return status == engine.InstanceCompleted || status == engine.InstanceFailed || status == engine.InstanceCancelled
}

// eraseView asks to erase inst.
func (c *Console) eraseView(r *http.Request, inst engine.Instance) actionView {
	ctx := r.Context()
	v := actionView{Action: string(engine.ActionErase), LastSeen: "0",
		reasonForm: newReasonForm(r, eraseHref(inst.ID), T(ctx, "Reason (recorded in the audit log)"), instanceHref(inst.ID), T(ctx, "Keep the instance"))}
	v.Danger = true
	v.ReasonHint = T(ctx, "Say why, for whoever reads the log later: at most %d characters. It is kept after the erasure, whatever the retention: write the request’s reference, not the person’s name.", engine.MaxReason)
	v.Chrome = c.chrome(r, T(ctx, "Erase process instance %s", inst.ID), "instances")
	v.Question = T(ctx, "Erase this instance now? It is deleted with its occurrences and their attempts, as retention would delete it.")
	v.Consequence = T(ctx, "Its inputs, outputs, business key and the workers’ messages go with it; this cannot be undone. The audit records naming it stay (who did what, and why), and so do backups until they expire.")
	v.Confirm = T(ctx, "Erase the instance")
	return v
}

// notErasable says why an instance cannot be erased now.
func notErasable(ctx context.Context, status string) string {
	return T(ctx, "This instance is %s: only an ended instance can be erased. Stop it first.", statusLabel(ctx, status))
}

// instanceEraseConfirm asks before erasing. An instance still running or
// held goes back to its page, which says why.
func (c *Console) instanceEraseConfirm(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	if errs := queryProblems(ctx, r.URL.RawQuery, draftReasonParam); len(errs) > 0 {
		c.cannotActOnInstance(w, r, id, errs)
		return
	}
	inst, err := c.eng.GetInstance(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if !instanceEnded(inst.Status) {
		c.redirectWithFlash(w, r, instanceHref(id), flash{Text: notErasable(ctx, inst.Status), Warning: true})
		return
	}
	c.render(w, r, http.StatusOK, actionPage(c.eraseView(r, inst)))
}

// instanceErase erases the instance (Post/Redirect/Get to the instances
// list: its own page is gone). A refusal re-renders the confirmation with
// what happened, the reason kept.
func (c *Console) instanceErase(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	if errs := append(queryProblems(ctx, r.URL.RawQuery), paramProblems(ctx, r.PostForm, csrfField, "last_action", "reason")...); len(errs) > 0 {
		c.cannotActOnInstance(w, r, id, errs)
		return
	}
	p, _ := auth.FromContext(ctx)
	reason := formReason(r)
	e, err := c.eng.Erase(ctx, engine.Actor{TokenID: p.TokenID, Name: p.Name}, id, reason)
	if err != nil {
		fe, ok := shownRefusal(err)
		if !ok {
			c.fail(w, r, err)
			return
		}
		inst, gerr := c.eng.GetInstance(ctx, id)
		if gerr != nil {
			c.fail(w, r, gerr)
			return
		}
		v := c.eraseView(r, inst)
		v.Reason = reason
		status := http.StatusConflict
		if fe.Code == "instance_not_ended" {
			v.close(ctx)
			v.Error = notErasable(ctx, inst.Status)
		} else {
			status = v.refuse(ctx, fe, reason)
		}
		c.render(w, r, status, actionPage(v))
		return
	}
	msg := flash{Text: T(ctx, "Erased: instance %s is deleted (occurrences: %d, attempts: %d). Recorded in the audit log.", id, e.Occurrences, e.Attempts)}
	if !e.Applied {
		msg = flash{Text: T(ctx, "This instance had already been erased, by %s at %s; nothing changed and nothing was recorded.", e.Record.ActorName, formatTime(ctx, e.Record.At).Text),
			Warning: true, Reason: reason, NotRecorded: T(ctx, "The reason you gave, not recorded:")}
	}
	c.logger.Info("console: operator action", "action", engine.ActionErase, "instance", id, "applied", e.Applied, "by", p.Name)
	c.redirectWithFlash(w, r, instancesPath, msg)
}
