package service

import (
	"context"
	"strings"
	"time"

	"hookrelay/store"
)

// AppInput is an app's fields as a call gives them: nil keeps the field.
type AppInput struct {
	Name *string `json:"name"`
	// Retention is a Go duration from MinRetention to MaxRetention, or ""
	// for the server's.
	Retention *string `json:"retention"`
}

// App is an app as callers see it.
type App struct {
	store.App
	// Retention is the app's override of the server's retention, absent
	// when it keeps the server's.
	Retention string `json:"retention,omitempty"`
}

func viewApp(a store.App) App {
	v := App{App: a}
	if a.Retention > 0 {
		v.Retention = a.Retention.String()
	}
	return v
}

// Audited app calls.
var (
	actCreateApp = action{"POST", "/v1/apps", 201}
	actPatchApp  = action{"PATCH", "/v1/apps/:app", 200}
	actDeleteApp = action{"DELETE", "/v1/apps/:app", 204}
)

// retention parses in's retention ("" goes back to the server's).
func (in AppInput) retention() (*time.Duration, error) {
	if in.Retention == nil {
		return nil, nil
	}
	var d time.Duration
	if *in.Retention != "" {
		var err error
		d, err = time.ParseDuration(*in.Retention)
		if err != nil || d < MinRetention || d > MaxRetention {
			return nil, invalidf("retention", "retention must be a Go duration from %s to %s, or \"\" for the server's", MinRetention, MaxRetention)
		}
	}
	return &d, nil
}

func validName(name *string) error {
	if name == nil || strings.TrimSpace(*name) == "" || len(*name) > MaxNameLength {
		return invalidf("name", "name is required (1–%d characters)", MaxNameLength)
	}
	return nil
}

// CreateApp creates an app (admin only).
func (s *Service) CreateApp(ctx context.Context, p principal, in AppInput) (App, error) {
	if err := AdminOnly(p); err != nil {
		return App{}, err
	}
	if err := validName(in.Name); err != nil {
		return App{}, err
	}
	keep, err := in.retention()
	if err != nil {
		return App{}, err
	}
	a := store.App{Name: *in.Name}
	if keep != nil {
		a.Retention = *keep
	}
	if a, err = s.store.CreateApp(ctx, a); err != nil {
		return App{}, typed(err)
	}
	s.record(ctx, p, "", actCreateApp, "/v1/apps")
	return viewApp(a), nil
}

// ListApps lists a page of apps (admin only).
func (s *Service) ListApps(ctx context.Context, p principal, pg Page) (List[App], error) {
	if err := AdminOnly(p); err != nil {
		return List[App]{}, err
	}
	sp, err := pg.store()
	if err != nil {
		return List[App]{}, err
	}
	apps, err := s.store.ListApps(ctx, sp)
	if err != nil {
		return List[App]{}, typed(err)
	}
	views := make([]App, len(apps))
	for i, a := range apps {
		views[i] = viewApp(a)
	}
	return listOf(sp, views, func(a App) string { return a.ID }), nil
}

// GetApp is app appID.
func (s *Service) GetApp(ctx context.Context, p principal, appID string) (App, error) {
	if err := Authorize(p, appID); err != nil {
		return App{}, err
	}
	a, err := s.store.GetApp(ctx, appID)
	if err != nil {
		return App{}, typed(err)
	}
	return viewApp(a), nil
}

// PatchApp changes the fields given: name, retention.
func (s *Service) PatchApp(ctx context.Context, p principal, appID string, in AppInput) (App, error) {
	if err := keyCall(p, appID); err != nil {
		return App{}, err
	}
	if in.Name != nil {
		if err := validName(in.Name); err != nil {
			return App{}, err
		}
	}
	keep, err := in.retention()
	if err != nil {
		return App{}, err
	}
	a, err := s.store.UpdateApp(ctx, appID, store.AppPatch{Name: in.Name, Retention: keep})
	if err != nil {
		return App{}, typed(err)
	}
	s.record(ctx, p, appID, actPatchApp, "/v1/apps/"+appID)
	return viewApp(a), nil
}

// DeleteApp deletes an app (admin only); its workflows are canceled
// through the outbox in the same transaction. The operations app cannot
// be deleted (*ConflictError).
func (s *Service) DeleteApp(ctx context.Context, p principal, appID string) error {
	if err := AdminOnly(p); err != nil {
		return err
	}
	if appID == store.OperationsApp {
		return &ConflictError{Field: "app", Detail: store.OperationsApp + " receives operational webhooks and cannot be deleted; delete its endpoints instead"}
	}
	if err := s.store.DeleteApp(ctx, appID); err != nil {
		return typed(err)
	}
	s.record(ctx, p, appID, actDeleteApp, "/v1/apps/"+appID)
	return nil
}
