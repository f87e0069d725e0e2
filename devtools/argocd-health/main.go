// Command argocd-health computes Argo CD resource health the way Argo CD's application
// controller does, with Argo CD's own code: the argocd-cm ConfigMap is parsed by Argo CD's
// settings manager (github.com/argoproj/argo-cd/v3/util/settings), and each object's health is
// computed by gitops-engine's health.GetResourceHealth with Argo CD's Lua overrides
// (github.com/argoproj/argo-cd/v3/util/lua), which run the custom health scripts in Argo CD's
// sandboxed gopher-lua environment.
//
// Usage:
//
//	argocd-health ARGOCD_CM_PATCH.yaml < objects.jsonl
//
// ARGOCD_CM_PATCH.yaml holds a `data:` map as merged into argocd-cm (deploy/argocd's patch).
// Standard input carries one Kubernetes object per line as JSON; standard output gets one line
// per object: {"status": "...", "message": "..."}, or {"error": "..."} when Argo CD reports an
// error (a Lua error, or a script returning something that is not a health table).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/argoproj/gitops-engine/pkg/health"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
)

const namespace = "argocd"

type result struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health ARGOCD_CM_PATCH.yaml < objects.jsonl")
		os.Exit(2)
	}
	overrides, err := resourceOverrides(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "argocd-health: %v\n", err)
		os.Exit(2)
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	out := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		if err := out.Encode(evaluate(scanner.Bytes(), overrides)); err != nil {
			fmt.Fprintf(os.Stderr, "argocd-health: %v\n", err)
			os.Exit(1)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "argocd-health: reading objects: %v\n", err)
		os.Exit(1)
	}
}

// resourceOverrides reads the patch's data into an in-memory argocd-cm and lets Argo CD's
// settings manager parse it, exactly as the controller parses the live ConfigMap.
func resourceOverrides(path string) (lua.ResourceHealthOverrides, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var patch struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &patch); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      common.ArgoCDConfigMapName,
			Namespace: namespace,
			Labels:    map[string]string{"app.kubernetes.io/part-of": "argocd"},
		},
		Data: patch.Data,
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      common.ArgoCDSecretName,
			Namespace: namespace,
			Labels:    map[string]string{"app.kubernetes.io/part-of": "argocd"},
		},
	}
	manager := settings.NewSettingsManager(context.Background(), fake.NewClientset(cm, secret), namespace)
	overrides, err := manager.GetResourceOverrides()
	if err != nil {
		return nil, fmt.Errorf("argocd-cm from %s: %w", path, err)
	}
	return lua.ResourceHealthOverrides(overrides), nil
}

func evaluate(line []byte, overrides lua.ResourceHealthOverrides) result {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(line); err != nil {
		return result{Error: fmt.Sprintf("not a Kubernetes object: %v", err)}
	}
	status, err := health.GetResourceHealth(obj, overrides)
	if err != nil {
		return result{Error: err.Error()}
	}
	if status == nil {
		return result{}
	}
	return result{Status: string(status.Status), Message: status.Message}
}
