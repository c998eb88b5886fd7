package main

import (
	"errors"
	"io"
	"net/url"
	"os"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"
)

// manifest is what TestK8sManifests reads of a Kubernetes object.
type manifest struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		Ports []struct {
			Port       int
			TargetPort int `yaml:"targetPort"`
		}
		Template struct {
			Spec struct {
				Containers []struct {
					Image string
					Args  []string
					Ports []struct {
						ContainerPort int `yaml:"containerPort"`
					}
				}
			}
		}
	}
}

// TestK8sManifests: every mocker container of deploy/k8s runs a mocker command whose flags mocker parses;
// the workers and the frontends reach the NATS Service at its name and port and serve the same model, and
// the frontend Service targets the port the frontend listens on.
func TestK8sManifests(t *testing.T) {
	f, err := os.Open("../../deploy/k8s/mocker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	services := map[string]manifest{}
	var deployments []manifest
	for dec := yaml.NewDecoder(f); ; {
		var m manifest
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch m.Kind {
		case "Service":
			services[m.Metadata.Name] = m
		case "Deployment":
			deployments = append(deployments, m)
		}
	}
	models := map[string]string{}
	for _, d := range deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Image != "mocker:latest" {
				continue
			}
			cmd, rest, err := newRootCmd().Find(c.Args)
			if err != nil || cmd.Name() != c.Args[0] {
				t.Fatalf("%s: %v: not a mocker command (%v)", d.Metadata.Name, c.Args, err)
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Fatalf("%s: mocker %v: %v", d.Metadata.Name, c.Args, err)
			}
			fs := cmd.Flags()
			u, err := url.Parse(fs.Lookup("nats").Value.String())
			if err != nil {
				t.Fatal(err)
			}
			nats, ok := services[u.Hostname()]
			if port, _ := strconv.Atoi(u.Port()); !ok || len(nats.Spec.Ports) == 0 || nats.Spec.Ports[0].Port != port {
				t.Errorf("%s: --nats %s names no Service port", d.Metadata.Name, u)
			}
			models[cmd.Name()] = fs.Lookup("model").Value.String()
			if cmd.Name() == "frontend" {
				port, _ := strconv.Atoi(fs.Lookup("port").Value.String())
				svc := services["mocker-frontend"]
				if len(c.Ports) == 0 || c.Ports[0].ContainerPort != port || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].TargetPort != port ||
					fs.Lookup("host").Value.String() != "0.0.0.0" {
					t.Errorf("frontend listens on %s:%d; container ports %+v, Service %+v", fs.Lookup("host").Value, port, c.Ports, svc.Spec.Ports)
				}
			}
		}
	}
	if len(models) != 2 || models["frontend"] != models["worker"] {
		t.Errorf("models by command %v: want a frontend and workers serving one model", models)
	}
}
