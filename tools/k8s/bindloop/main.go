// bindloop: the apiserver's bind ceiling for `make bench-peers` (bench/bench_peers.py), and its fast object
// loader. Built from the tools/k8s module (the control plane's own client-go, no new downloads) by
// tools/build-bindloop.sh into the binary cache, never into the checkout.
//
//	bindloop -kubeconfig K -workers 64 bind -namespace NS [-node-selector type=bench]
//	    list NS's pods without spec.nodeName, bind them round-robin onto the selected nodes with N goroutines,
//	    QPS unlimited, protobuf on the wire (as kube-scheduler talks); print one JSON line.
//	-events: after each bind, create the pod's `Scheduled` Event (core/v1, as Volcano's recorder does);
//	-podgroups: once every listed pod of a PodGroup (annotation scheduling.k8s.io/group-name) is bound, merge-patch
//	    the PodGroup's status to Running, once (with -events, also the PodGroup's Scheduled event). With both it is
//	    the "limit" of `make bench-peers`: what Volcano's users see after a gang is bound (a Scheduled event per
//	    pod, the gang's PodGroup Running and its Scheduled event) and nothing else.
//	-http1 (the default) talks HTTP/1.1 over up to N connections, as volcano-py's urllib3 pool does; -http1=false
//	    is client-go's default, every request a stream of one HTTP/2 connection (as kube-scheduler and Volcano
//	    talk). On a quiet 2-core machine the two gave the same rate (815 and 823 binds/s, 4,000 pods); HTTP/1.1
//	    is the default because it is how volcano-py's binder talks.
//	bindloop -kubeconfig K -workers 64 create -f objects.jsonl
//	    POST every line's {"path": ..., "body": {...}} as JSON; an object that already exists counts as created.
//
// No scheduling: nothing is filtered or scored, so the binds/s it reports is what the apiserver (with etcd
// behind it) can take on this machine, the yardstick the schedulers' binds/s are divided by.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type result struct {
	Mode      string  `json:"mode"`
	Done      int64   `json:"done"`
	Errors    int64   `json:"errors"`
	Workers   int     `json:"workers"`
	HTTP1     bool    `json:"http1"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_s"`
	ListS     float64 `json:"list_s,omitempty"`
	FirstErr  string  `json:"first_error,omitempty"`
	Events    int64   `json:"events,omitempty"`
	PodGroups int64   `json:"podgroups,omitempty"`
	WriteErrs int64   `json:"write_errors,omitempty"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bindloop: "+format+"\n", args...)
	os.Exit(2)
}

var http1 = flag.Bool("http1", true, "HTTP/1.1 over many connections instead of one HTTP/2 connection")

func restConfig(kubeconfig string, protobuf bool, workers int) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fail("kubeconfig %s: %v", kubeconfig, err)
	}
	cfg.QPS = -1 // no client-side rate limit
	cfg.Timeout = 60 * time.Second
	if *http1 {
		cfg.NextProtos = []string{"http/1.1"}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			if t, ok := rt.(*http.Transport); ok {
				t.MaxIdleConnsPerHost = workers // keep every worker's connection: no TLS handshake per request
			}
			return rt
		}
	}
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return cfg
}

// run calls do(i) for i in [0, n) from `workers` goroutines; returns the count of errors and the first one.
func run(n, workers int, do func(int) error) (int64, string) {
	var next, errs atomic.Int64
	var first sync.Once
	var firstErr string
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errs.Add(1)
					first.Do(func() { firstErr = err.Error() })
				}
			}
		}()
	}
	wg.Wait()
	return errs.Load(), firstErr
}

const groupAnnotation = "scheduling.k8s.io/group-name"

// writes sends, after a pod's bind, what users see of it: its Scheduled event and, once its gang is whole, the
// PodGroup's status Running. Counters are atomic: the bind goroutines call after() concurrently.
type writes struct {
	cs                        *kubernetes.Clientset
	events, podgroups         bool
	size                      map[string]int64         // listed pods per PodGroup
	bound                     map[string]*atomic.Int64 // bound pods per PodGroup (the map itself is never written)
	nEvents, nGroups, nErrors atomic.Int64
}

func newWrites(cs *kubernetes.Clientset, events, podgroups bool, pods []corev1.Pod) *writes {
	w := &writes{cs: cs, events: events, podgroups: podgroups, size: map[string]int64{},
		bound: map[string]*atomic.Int64{}}
	for i := range pods {
		if g := pods[i].Annotations[groupAnnotation]; g != "" && podgroups {
			w.size[g]++
			if w.bound[g] == nil {
				w.bound[g] = &atomic.Int64{}
			}
		}
	}
	return w
}

func (w *writes) after(ctx context.Context, p *corev1.Pod, node string) {
	if w.events {
		w.event(ctx, p.Namespace, corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Name: p.Name,
			Namespace: p.Namespace, UID: p.UID}, fmt.Sprintf("Successfully assigned %s/%s to %s", p.Namespace, p.Name, node))
	}
	g := p.Annotations[groupAnnotation]
	if counter := w.bound[g]; counter != nil && counter.Add(1) == w.size[g] {
		body, _ := json.Marshal(map[string]any{"status": map[string]any{
			"phase": "Running", "running": w.size[g], "succeeded": 0, "failed": 0,
			"conditions": []map[string]any{{"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
				"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}}}})
		err := w.cs.CoreV1().RESTClient().Patch(types.MergePatchType).
			AbsPath("/apis/scheduling.volcano.sh/v1beta1/namespaces", p.Namespace, "podgroups", g).
			Body(body).Do(ctx).Error()
		w.count(&w.nGroups, err)
		if w.events { // the PodGroup's own Scheduled event, as Volcano's RecordJobStatusEvent sends it
			w.event(ctx, p.Namespace, corev1.ObjectReference{APIVersion: "scheduling.volcano.sh/v1beta1",
				Kind: "PodGroup", Name: g, Namespace: p.Namespace}, "pod group is ready")
		}
	}
}

func (w *writes) event(ctx context.Context, ns string, about corev1.ObjectReference, message string) {
	now := metav1.Now()
	_, err := w.cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", about.Name, time.Now().UnixNano()), Namespace: ns},
		InvolvedObject: about, Type: corev1.EventTypeNormal, Reason: "Scheduled", Message: message,
		Source: corev1.EventSource{Component: "bindloop"}, ReportingController: "bindloop",
		ReportingInstance: "bindloop", FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
	w.count(&w.nEvents, err)
}

func (w *writes) count(done *atomic.Int64, err error) {
	if err != nil {
		w.nErrors.Add(1)
		return
	}
	done.Add(1)
}

func bind(kubeconfig string, workers int, args []string) result {
	fs := flag.NewFlagSet("bind", flag.ExitOnError)
	ns := fs.String("namespace", "", "namespace whose pending pods to bind")
	selector := fs.String("node-selector", "", "label selector of the nodes to bind onto")
	events := fs.Bool("events", false, "after each bind, create the pod's Scheduled event")
	podgroups := fs.Bool("podgroups", false, "once a PodGroup's listed pods are all bound, patch its status Running")
	_ = fs.Parse(args)
	if *ns == "" {
		fail("bind: -namespace is required")
	}
	cs, err := kubernetes.NewForConfig(restConfig(kubeconfig, true, workers))
	if err != nil {
		fail("client: %v", err)
	}
	ctx := context.Background()
	t0 := time.Now()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: *selector})
	if err != nil {
		fail("list nodes: %v", err)
	}
	pods, err := cs.CoreV1().Pods(*ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil {
		fail("list pods: %v", err)
	}
	if len(nodes.Items) == 0 {
		fail("bind: no nodes match %q", *selector)
	}
	w := newWrites(cs, *events, *podgroups, pods.Items)
	listed := time.Since(t0)
	start := time.Now()
	errs, firstErr := run(len(pods.Items), workers, func(i int) error {
		p := &pods.Items[i]
		node := nodes.Items[i%len(nodes.Items)].Name
		err := cs.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err == nil {
			w.after(ctx, p, node)
		}
		return err
	})
	took := time.Since(start).Seconds()
	done := int64(len(pods.Items)) - errs
	return result{Mode: "bind", Done: done, Errors: errs, Workers: workers, HTTP1: *http1, Seconds: took,
		PerSecond: float64(done) / max(took, 1e-9), ListS: listed.Seconds(), FirstErr: firstErr,
		Events: w.nEvents.Load(), PodGroups: w.nGroups.Load(), WriteErrs: w.nErrors.Load()}
}

type item struct {
	Path string          `json:"path"`
	Body json.RawMessage `json:"body"`
}

func create(kubeconfig string, workers int, args []string) result {
	fs := flag.NewFlagSet("create", flag.ExitOnError)
	file := fs.String("f", "", "JSON lines of {\"path\": ..., \"body\": {...}}")
	_ = fs.Parse(args)
	f, err := os.Open(*file)
	if err != nil {
		fail("create: %v", err)
	}
	var items []item
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var it item
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			fail("create: %s: line %d: %v", *file, len(items)+1, err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		fail("create: %s: %v", *file, err)
	}
	_ = f.Close()
	cs, err := kubernetes.NewForConfig(restConfig(kubeconfig, false, workers))
	if err != nil {
		fail("client: %v", err)
	}
	rc := cs.CoreV1().RESTClient()
	ctx := context.Background()
	start := time.Now()
	errs, firstErr := run(len(items), workers, func(i int) error {
		err := rc.Post().AbsPath(items[i].Path).SetHeader("Content-Type", "application/json").
			Body([]byte(items[i].Body)).Do(ctx).Error()
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	took := time.Since(start).Seconds()
	done := int64(len(items)) - errs
	return result{Mode: "create", Done: done, Errors: errs, Workers: workers, HTTP1: *http1, Seconds: took,
		PerSecond: float64(done) / max(took, 1e-9), FirstErr: firstErr}
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	workers := flag.Int("workers", 64, "concurrent requests")
	flag.Parse()
	if flag.NArg() < 1 {
		fail("usage: bindloop [-kubeconfig K] [-workers N] bind|create ...")
	}
	var r result
	switch flag.Arg(0) {
	case "bind":
		r = bind(*kubeconfig, *workers, flag.Args()[1:])
	case "create":
		r = create(*kubeconfig, *workers, flag.Args()[1:])
	default:
		fail("unknown mode %q (bind or create)", flag.Arg(0))
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	if r.Errors > 0 {
		os.Exit(1)
	}
}
