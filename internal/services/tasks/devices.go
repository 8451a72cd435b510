package tasks

import (
	"net/http"
	"strings"
)

// MaxPushToken is the longest push token accepted (APNs and FCM tokens are
// a few hundred bytes).
const MaxPushToken = 4096

type deviceInput struct {
	Platform  string `json:"platform"`
	PushToken string `json:"push_token"`
}

func (s *Service) createDevice(w http.ResponseWriter, r *http.Request, uid int64) error {
	var in deviceInput
	if err := s.decode(w, r, &in); err != nil {
		return err
	}
	switch in.Platform {
	case "ios", "android", "web":
	default:
		return invalid("platform", "must be ios, android or web")
	}
	tok := strings.TrimSpace(in.PushToken)
	if tok == "" || len(tok) > MaxPushToken {
		return invalid("push_token", "required, at most %d bytes", MaxPushToken)
	}
	if err := noNUL("push_token", tok); err != nil {
		return err
	}
	d, created, err := s.store.createDevice(r.Context(), uid, in.Platform, tok, s.cfg.MaxDevicesPerUser)
	if err != nil {
		return err
	}
	if !created {
		return writeJSON(w, http.StatusOK, d) // the token's device already
	}
	return writeJSON(w, http.StatusCreated, d)
}

func (s *Service) listDevices(w http.ResponseWriter, r *http.Request, uid int64) error {
	ds, err := s.store.devices(r.Context(), uid)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []Device{}
	}
	return writeJSON(w, http.StatusOK, map[string][]Device{"devices": ds})
}

func (s *Service) deleteDevice(w http.ResponseWriter, r *http.Request, uid int64) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.store.deleteDevice(r.Context(), uid, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
