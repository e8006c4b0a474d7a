package camunda

import (
	"context"
	"strconv"

	"github.com/relais/relais/engine"
)

// externalTask is Camunda's ExternalTaskDto: every member is written,
// null when Relais has nothing for it (see the mapping table of docs/camunda.md).
type externalTask struct {
	ActivityID                  string       `json:"activityId"`
	ActivityInstanceID          *string      `json:"activityInstanceId"`
	ErrorMessage                *string      `json:"errorMessage"`
	ExecutionID                 *string      `json:"executionId"`
	ID                          string       `json:"id"`
	LockExpirationTime          *camundaTime `json:"lockExpirationTime"`
	CreateTime                  camundaTime  `json:"createTime"`
	ProcessDefinitionID         *string      `json:"processDefinitionId"`
	ProcessDefinitionKey        *string      `json:"processDefinitionKey"`
	ProcessDefinitionVersionTag *string      `json:"processDefinitionVersionTag"`
	ProcessInstanceID           string       `json:"processInstanceId"`
	TenantID                    *string      `json:"tenantId"`
	Retries                     int          `json:"retries"`
	Suspended                   bool         `json:"suspended"`
	WorkerID                    *string      `json:"workerId"`
	Priority                    int          `json:"priority"`
	TopicName                   string       `json:"topicName"`
	BusinessKey                 *string      `json:"businessKey"`
}

// lockedTask is Camunda's LockedExternalTaskDto, what fetchAndLock answers.
type lockedTask struct {
	externalTask
	ErrorDetails        *string             `json:"errorDetails"`
	Variables           map[string]variable `json:"variables"`
	ExtensionProperties map[string]string   `json:"extensionProperties"`
}

// lockedTask makes the answer for one reservation: its inputs as typed
// variables of the pinned revision (only those the topic asked for), and,
// when the topic asks, Relais's own facts as extension properties. Its
// topicName is the topic t subscribed (a pattern such as crm.*, or the
// definition's key): clients look their handler up by it.
func (f *Facade) lockedTask(ctx context.Context, res engine.Reservation, workerID string, t topicJSON) (lockedTask, error) {
	worker := workerID
	lt := lockedTask{
		externalTask: externalTask{
			ActivityID: res.Node, ErrorMessage: res.ErrorMessage, ID: res.ID.String(),
			LockExpirationTime: timePtr(&res.LockExpiresAt), CreateTime: camundaTime(res.CreatedAt),
			ProcessDefinitionKey: res.ProcessKey, ProcessInstanceID: res.InstanceID.String(),
			// Retries counts this execution: failing it with retries-1,
			// as Camunda workers do, keeps the occurrence's budget.
			Retries: res.AttemptsLeft + 1, WorkerID: &worker, Priority: res.Priority,
			TopicName: t.TopicName, BusinessKey: res.BusinessKey,
		},
		Variables:           map[string]variable{},
		ExtensionProperties: map[string]string{},
	}
	if t.Variables == nil || len(t.Variables) > 0 {
		rev, err := f.eng.GetRevision(ctx, res.Definition, res.Revision)
		if err != nil {
			return lockedTask{}, err
		}
		if lt.Variables, err = variablesOf(res.Inputs, rev.Working.Inputs); err != nil {
			return lockedTask{}, err
		}
	}
	if t.IncludeExtensionProperties != nil && *t.IncludeExtensionProperties {
		lt.ExtensionProperties["relais.definition"] = res.Definition
		lt.ExtensionProperties["relais.revision"] = strconv.Itoa(res.Revision)
		lt.ExtensionProperties["relais.attempt"] = strconv.Itoa(res.Attempt)
		if res.DeadlineAt != nil {
			lt.ExtensionProperties["relais.deadline"] = res.DeadlineAt.UTC().Format(dateLayout)
		}
	}
	return lt, nil
}

// heldBy reports whether consumerID holds (or last held) o.
func heldBy(o engine.Occurrence, consumerID int64) bool {
	return o.ConsumerID != nil && *o.ConsumerID == consumerID
}

// taskOf is the ExternalTaskDto of an observed open occurrence, as
// consumerID sees it: the worker of another consumer, whose lock lapsed,
// is not named.
func taskOf(o engine.Occurrence, consumerID int64) externalTask {
	worker := o.WorkerID
	if !heldBy(o, consumerID) {
		worker = nil
	}
	return externalTask{
		ActivityID: o.Node, ErrorMessage: o.ErrorMessage, ID: o.ID.String(),
		LockExpirationTime: timePtr(o.LockExpiresAt), CreateTime: camundaTime(o.CreatedAt),
		ProcessDefinitionKey: nonEmpty(o.ProcessKey), ProcessInstanceID: o.InstanceID.String(),
		Retries: o.Remaining(), WorkerID: worker, Priority: o.Policy.Priority,
		TopicName: o.Definition, BusinessKey: o.BusinessKey,
	}
}

// nonEmpty is s, or nil (JSON null) when Relais does not know it.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
