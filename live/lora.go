package live

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/mocker-sim/mocker/workload"
)

// LoRAModule is a LoRA adapter a server serves: vLLM's --lora-modules NAME=PATH (the path is only listed).
type LoRAModule struct{ Name, Path string }

// isLoRA reports whether name is one of the adapters served now.
func (s *Server) isLoRA(name string) bool {
	return slices.ContainsFunc(*s.loras.Load(), func(m LoRAModule) bool { return m.Name == name })
}

// loraRequest is the body of vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter.
type loraRequest struct {
	Name *string `json:"lora_name"`
	Path *string `json:"lora_path"`
}

// loadLoRA serves another adapter from now on, as vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING does: its
// requests may name it, and /v1/models lists it. Its weights are loaded when a pass first uses it
// (--lora-load-ms), as for the adapters given at startup.
func (s *Server) loadLoRA(x exchange) {
	req, e := s.loraBody(x)
	if e != nil {
		x.writeError(e)
		return
	}
	if req.Path == nil || *req.Path == "" {
		x.writeError(badRequest("lora_path", "Both 'lora_name' and 'lora_path' must be provided."))
		return
	}
	if len(*req.Name) > workload.MaxLoRAName {
		x.writeError(badRequest("lora_name", "An adapter's name is at most %d bytes.", workload.MaxLoRAName))
		return
	}
	m := LoRAModule{Name: *req.Name, Path: *req.Path}
	if e := s.updateLoRAs(func(mods []LoRAModule) ([]LoRAModule, *apiError) {
		if slices.ContainsFunc(mods, func(x LoRAModule) bool { return x.Name == m.Name }) || m.Name == s.o.ModelName {
			return nil, badRequest("lora_name", "The lora adapter '%s' has already been loaded.", m.Name)
		}
		return append(slices.Clip(mods), m), nil
	}); e != nil {
		x.writeError(e)
		return
	}
	x.write(http.StatusOK, "text/plain; charset=utf-8", fmt.Appendf(nil, "Success: LoRA adapter '%s' added successfully.", m.Name))
}

// unloadLoRA stops serving an adapter: requests naming it are refused from now on (those already
// admitted run their course).
func (s *Server) unloadLoRA(x exchange) {
	req, e := s.loraBody(x)
	if e != nil {
		x.writeError(e)
		return
	}
	if e := s.updateLoRAs(func(mods []LoRAModule) ([]LoRAModule, *apiError) {
		i := slices.IndexFunc(mods, func(x LoRAModule) bool { return x.Name == *req.Name })
		if i < 0 {
			return nil, &apiError{status: http.StatusNotFound, typ: "NotFoundError", param: "lora_name",
				message: fmt.Sprintf("The lora adapter '%s' cannot be found.", *req.Name)}
		}
		return slices.Delete(slices.Clone(mods), i, i+1), nil
	}); e != nil {
		x.writeError(e)
		return
	}
	x.write(http.StatusOK, "text/plain; charset=utf-8", fmt.Appendf(nil, "Success: LoRA adapter '%s' removed successfully.", *req.Name))
}

// loraBody reads a load or unload request, which must name an adapter.
func (s *Server) loraBody(x exchange) (*loraRequest, *apiError) {
	body, e := s.readBody(x, nil)
	if e != nil {
		return nil, e
	}
	var req loraRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badRequest("", "invalid JSON body: %v", err)
	}
	if req.Name == nil || *req.Name == "" {
		return nil, badRequest("lora_name", "'lora_name' must be provided.")
	}
	return &req, nil
}

// updateLoRAs replaces the adapters with what f makes of them; loads and unloads are serialised.
func (s *Server) updateLoRAs(f func([]LoRAModule) ([]LoRAModule, *apiError)) *apiError {
	s.loraMu.Lock()
	defer s.loraMu.Unlock()
	mods, e := f(*s.loras.Load())
	if e != nil {
		return e
	}
	s.loras.Store(&mods)
	return nil
}
