// Package admission is the API server's admission chain: plugins that see
// every write (create, update, delete, the creates of action subresources
// such as serviceaccounts/token, and the connects of pods/exec, attach and
// portforward) with the requesting user. Mutating plugins (Mutator) see
// it after the kind's defaulting and before its validation, and may
// change the object; validating plugins (Plugin) see it after validation,
// before the write is stored, and may refuse it, as upstream's mutating
// and validating admission plugins (NodeRestriction, the admission
// webhooks).
package admission

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Operation is what a write does, in upstream's words.
type Operation string

// The operations admission sees.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
	// Connect is a pods/exec, attach or portforward request.
	Connect Operation = "CONNECT"
)

// Attributes describe one write.
type Attributes struct {
	Operation Operation
	Resource  schema.GroupResource
	// Kind is the object's kind, Version the resource's version the
	// request was made in.
	Kind        schema.GroupVersionKind
	Version     string
	Subresource string
	Namespace   string
	// Name is the object's name ("" on a create of an object named by
	// generateName).
	Name string
	// Object is the object to store (the posted object of an action);
	// nil on delete.
	Object runtime.Object
	// OldObject is the stored object on update and delete.
	OldObject runtime.Object
	User      user.Info
	DryRun    bool
	// Options are the request's CreateOptions, UpdateOptions or
	// DeleteOptions (the connect's options object on Connect).
	Options runtime.Object
}

// Plugin decides on writes.
type Plugin interface {
	// Validate refuses the write with an error (an API error, as
	// Forbidden's), or lets it through with nil.
	Validate(ctx context.Context, a *Attributes) error
}

// Mutator is a plugin that may also change the object of a create or
// update (on the write's Object) before the kind validates it.
type Mutator interface {
	Admit(ctx context.Context, a *Attributes) error
}

// Chain asks each plugin in turn; the first refusal stands.
type Chain []Plugin

// Admit implements Mutator: each plugin that mutates, in turn.
func (c Chain) Admit(ctx context.Context, a *Attributes) error {
	for _, p := range c {
		if m, ok := p.(Mutator); ok {
			if err := m.Admit(ctx, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate implements Plugin.
func (c Chain) Validate(ctx context.Context, a *Attributes) error {
	for _, p := range c {
		if err := p.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Forbidden is upstream's refusal of a write by a plugin: 403, the
// object named by the URL, else by the object's name or generateName,
// else "Unknown".
func Forbidden(a *Attributes, err error) error {
	if apierrors.IsForbidden(err) {
		return err
	}
	name := a.Name
	if name == "" {
		name = "Unknown"
		if acc, aerr := meta.Accessor(a.Object); a.Object != nil && aerr == nil {
			switch {
			case acc.GetName() != "":
				name = acc.GetName()
			case acc.GetGenerateName() != "":
				name = acc.GetGenerateName()
			}
		}
	}
	return apierrors.NewForbidden(a.Resource, name, err)
}
