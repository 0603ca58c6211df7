// churngen: the arrival and completion generator of `make bench-peers`' churn size (bench/peers_churn.py). Built
// beside the bind loop from the tools/k8s module by tools/build-bindloop.sh into the binary cache.
//
//	churngen -kubeconfig K -namespace NS -scheduler NAME [-podgroups] -gang 8 -rate 200 -window 30s ...
//
// Against one scheduler (the contender, NAME) on a cluster of Ready nodes labelled -node-selector, all at once:
//   - arrivals: a gang of -gang pods (one GPU each, schedulerName NAME; with -podgroups a PodGroup of minMember
//     -gang and the group-name annotation, as Volcano's schedulers need) every gang/rate seconds, open loop, for
//     -window; first one probe gang, waited for, so the scheduler's start is not counted;
//   - completions: -lifetime after a gang's last pod was bound, its pods are deleted (grace 0, as a kubelet ends a
//     finished pod here: no kubelet) and its PodGroup with them;
//   - node churn: a node added every -node-every, each deleted -node-life after it came, with the pods bound to
//     it (as the pod garbage collector deletes a gone node's pods);
//   - a second scheduler (-other-scheduler): its own pods (no GPU, 100m CPU) at -other-rate pods/s, each bound by
//     this program onto a random node, deleted -lifetime later.
//
// A pod's creation time is when its POST was sent, its bind time when this program's watch first saw it bound.
// After the window, arrivals stop and the rest goes on until every contender pod is bound or -drain passed. One
// JSON line: the contender's binds/s (pods bound within [warmup, window)), the creation-to-bind latency of the
// pods created in that span (p50, p99; a pod never bound counts as infinite and makes a quantile null), CPU
// seconds of this program (getrusage) and of each -cpu-pid over the run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

var (
	kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	namespace  = flag.String("namespace", "", "namespace of every pod this program makes")
	scheduler  = flag.String("scheduler", "", "schedulerName of the contender's pods")
	podgroups  = flag.Bool("podgroups", false, "a PodGroup per gang and the group-name annotation (Volcano's schedulers)")
	gangSize   = flag.Int("gang", 8, "pods per gang")
	rate       = flag.Float64("rate", 100, "offered contender pods per second")
	window     = flag.Duration("window", 30*time.Second, "how long contender pods arrive")
	warmup     = flag.Duration("warmup", 5*time.Second, "start of the measured span within the window")
	drain      = flag.Duration("drain", 60*time.Second, "after the window, how long to wait for the rest to bind")
	lifetime   = flag.Duration("lifetime", 5*time.Second, "a gang's (another scheduler's pod's) life after its bind")
	nodeEvery  = flag.Duration("node-every", 2*time.Second, "a node added every (0: no node churn)")
	nodeLife   = flag.Duration("node-life", 10*time.Second, "a churn node deleted this long after it was added")
	nodeGPUs   = flag.Int("node-gpus", 16, "GPUs of a churn node")
	nodeSel    = flag.String("node-selector", "bench=peers", "label (k=v) of the cluster's nodes; churn nodes get it")
	prefix     = flag.String("prefix", "c", "prefix of this run's object names (churn nodes: PREFIX-node-N)")
	otherName  = flag.String("other-scheduler", "bench-other", "schedulerName of the second scheduler's pods")
	otherRate  = flag.Float64("other-rate", 0, "the second scheduler's pods per second (0: none)")
	probeWait  = flag.Duration("probe-timeout", 180*time.Second, "how long the probe gang may take to bind")
	workers    = flag.Int("workers", 64, "concurrent requests at most")
	cpuPids    = flag.String("cpu-pids", "", "name=pid,... whose CPU seconds (/proc) over the run to report")
)

type podRec struct {
	created time.Time
	bound   time.Time
	gang    string // "" for the second scheduler's pods
}

type gangRec struct {
	members, bound int
	pods           []string
}

type due struct {
	at   time.Time
	gang string // or a pod of the second scheduler
	pod  string
}

type gen struct {
	cs    *kubernetes.Clientset
	rc    rest.Interface
	ctx   context.Context
	sem   chan struct{}
	mu    sync.Mutex
	pods  map[string]*podRec
	gangs map[string]*gangRec
	dues  []due // completions, in the order they fall due
	nodes []string
	churn []churnNode

	errs         atomic.Int64
	firstErr     atomic.Value
	maxLag       atomic.Int64 // ns: how late an arrival's POST started after it was due
	completed    atomic.Int64 // contender pods deleted as complete
	nodesAdded   atomic.Int64
	nodesRemoved atomic.Int64
	orphans      atomic.Int64 // pods deleted with their node
	otherMade    atomic.Int64
	otherBound   atomic.Int64
}

type churnNode struct {
	name  string
	added time.Time
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "churngen: "+format+"\n", args...)
	os.Exit(2)
}

func (g *gen) err(what string, err error) {
	if err == nil || apierrors.IsNotFound(err) {
		return
	}
	g.errs.Add(1)
	g.firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v", what, err))
}

// do runs f on its own goroutine once one of -workers slots is free.
func (g *gen) do(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.sem <- struct{}{}
		defer func() { <-g.sem }()
		f()
	}()
}

func restConfig() *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("kubeconfig %s: %v", *kubeconfig, err)
	}
	cfg.QPS = -1
	cfg.Timeout = 60 * time.Second
	cfg.NextProtos = []string{"http/1.1"} // many connections, as bindloop's default
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if t, ok := rt.(*http.Transport); ok {
			t.MaxIdleConnsPerHost = *workers
		}
		return rt
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg
}

func podBody(name, sched, group string, gpus int) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"),
		corev1.ResourceMemory: resource.MustParse("1Gi")}
	res := corev1.ResourceRequirements{Requests: req}
	if gpus > 0 {
		res.Limits = corev1.ResourceList{gpu: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	} else {
		req[corev1.ResourceCPU] = resource.MustParse("100m")
		req[corev1.ResourceMemory] = resource.MustParse("128Mi")
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench-churn"}},
		Spec: corev1.PodSpec{SchedulerName: sched, Containers: []corev1.Container{
			{Name: "main", Image: "registry.invalid/train:latest", Resources: res}}},
	}
	if group != "" {
		p.Annotations = map[string]string{"scheduling.k8s.io/group-name": group}
	}
	return p
}

// makeGang creates one gang of the contender's pods (its PodGroup first, then its pods at once, as Volcano's job
// controller creates a job's pods: pkg/controllers/job/job_controller_actions.go) and records each pod's creation
// time. Every request takes one of -workers slots.
func (g *gen) makeGang(name string, dueAt time.Time) {
	group := ""
	if *podgroups {
		group = name
		body, _ := json.Marshal(map[string]any{
			"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"minMember": *gangSize, "queue": "default"}})
		release := g.slot()
		g.lagged(dueAt)
		err := g.rc.Post().AbsPath("/apis/scheduling.volcano.sh/v1beta1/namespaces", *namespace, "podgroups").
			SetHeader("Content-Type", "application/json").Body(body).Do(g.ctx).Error()
		release()
		g.err("create podgroup", err)
	}
	names := make([]string, *gangSize)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", name, i)
	}
	g.mu.Lock()
	g.gangs[name] = &gangRec{members: len(names), pods: names}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, pn := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := g.slot()
			defer release()
			g.lagged(dueAt)
			// stamped and recorded before the POST: the watch may see the pod bound before the POST returns
			rec := &podRec{gang: name, created: time.Now()}
			g.mu.Lock()
			g.pods[pn] = rec
			g.mu.Unlock()
			_, err := g.cs.CoreV1().Pods(*namespace).Create(g.ctx, podBody(pn, *scheduler, group, 1), metav1.CreateOptions{})
			if err != nil {
				g.err("create pod", err)
				g.mu.Lock()
				delete(g.pods, pn)
				g.gangs[name].members--
				g.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (g *gen) slot() func() {
	g.sem <- struct{}{}
	return func() { <-g.sem }
}

// lagged records how late a request of an arrival started after the arrival was due (open loop: the generator
// keeps its rate only while this stays small).
func (g *gen) lagged(dueAt time.Time) {
	if lag := time.Since(dueAt); lag > time.Duration(g.maxLag.Load()) {
		g.maxLag.Store(int64(lag))
	}
}

// makeOther is the second scheduler: create its pod, bind it onto a random node.
func (g *gen) makeOther(name string) {
	_, err := g.cs.CoreV1().Pods(*namespace).Create(g.ctx, podBody(name, *otherName, "", 0), metav1.CreateOptions{})
	if err != nil {
		g.err("create other pod", err)
		return
	}
	g.otherMade.Add(1)
	g.mu.Lock()
	node := g.nodes[rand.IntN(len(g.nodes))]
	g.mu.Unlock()
	err = g.cs.CoreV1().Pods(*namespace).Bind(g.ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: *namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	if err != nil {
		g.err("bind other pod", err)
		return
	}
	g.otherBound.Add(1)
	g.mu.Lock()
	g.dues = append(g.dues, due{at: time.Now().Add(*lifetime), pod: name})
	g.mu.Unlock()
}

// seen is the watch's handler: the first sight of a contender pod bound stamps it; a gang whose last pod is
// bound falls due for completion -lifetime later.
func (g *gen) seen(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	rec := g.pods[p.Name]
	if rec == nil || !rec.bound.IsZero() {
		return
	}
	rec.bound = now
	gr := g.gangs[rec.gang]
	gr.bound++
	if gr.bound == gr.members {
		g.dues = append(g.dues, due{at: now.Add(*lifetime), gang: rec.gang})
	}
}

func (g *gen) deletePod(name string) error {
	zero := int64(0)
	return g.cs.CoreV1().Pods(*namespace).Delete(g.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// complete deletes what has fallen due: a whole gang (and its PodGroup) or a second-scheduler pod.
func (g *gen) complete(wg *sync.WaitGroup) {
	now := time.Now()
	g.mu.Lock()
	n := 0
	for n < len(g.dues) && !g.dues[n].at.After(now) {
		n++
	}
	ready := append([]due(nil), g.dues[:n]...)
	g.dues = g.dues[n:]
	g.mu.Unlock()
	for _, d := range ready {
		if d.pod != "" {
			g.do(wg, func() { g.err("delete other pod", g.deletePod(d.pod)) })
			continue
		}
		g.mu.Lock()
		pods := g.gangs[d.gang].pods
		g.mu.Unlock()
		for _, pn := range pods {
			g.do(wg, func() {
				if err := g.deletePod(pn); err == nil {
					g.completed.Add(1)
				} else {
					g.err("delete pod", err)
				}
			})
		}
		if *podgroups {
			g.do(wg, func() {
				g.err("delete podgroup", g.rc.Delete().AbsPath("/apis/scheduling.volcano.sh/v1beta1/namespaces",
					*namespace, "podgroups", d.gang).Do(g.ctx).Error())
			})
		}
	}
}

func nodeBody(name string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("128"),
		corev1.ResourceMemory: resource.MustParse("1024Gi"), corev1.ResourcePods: resource.MustParse("250"),
		gpu: *resource.NewQuantity(int64(*nodeGPUs), resource.DecimalSI)}
	k, v, _ := strings.Cut(*nodeSel, "=")
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name,
			"type": "kwok", k: v}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy(), Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "bench"}}},
	}
}

// churnNodes adds node k and deletes those older than -node-life with their pods.
func (g *gen) churnNodes(k int) {
	name := fmt.Sprintf("%s-node-%d", *prefix, k)
	// created Ready with its status in the body, as bench_peers.py makes its nodes (no kubelet here)
	if _, err := g.cs.CoreV1().Nodes().Create(g.ctx, nodeBody(name), metav1.CreateOptions{}); err != nil {
		g.err("create node", err)
	} else {
		g.nodesAdded.Add(1)
		g.mu.Lock()
		g.nodes = append(g.nodes, name)
		g.churn = append(g.churn, churnNode{name, time.Now()})
		g.mu.Unlock()
	}
	for {
		g.mu.Lock()
		if len(g.churn) == 0 || time.Since(g.churn[0].added) < *nodeLife {
			g.mu.Unlock()
			return
		}
		gone := g.churn[0].name
		g.churn = g.churn[1:]
		for i, n := range g.nodes {
			if n == gone {
				g.nodes = append(g.nodes[:i:i], g.nodes[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		g.removeNode(gone)
	}
}

func (g *gen) removeNode(name string) {
	if err := g.cs.CoreV1().Nodes().Delete(g.ctx, name, metav1.DeleteOptions{}); err != nil {
		g.err("delete node", err)
		return
	}
	g.nodesRemoved.Add(1)
	pods, err := g.cs.CoreV1().Pods(*namespace).List(g.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		g.err("list a gone node's pods", err)
		return
	}
	for _, p := range pods.Items {
		if err := g.deletePod(p.Name); err == nil {
			g.orphans.Add(1)
		}
	}
}

// procCPU is a process's user+system CPU seconds from /proc (0 if it is gone).
func procCPU(pid string) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ is 100 on Linux
}

func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func parsePids(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, err := strconv.Atoi(v); err != nil {
				fail("-cpu-pids: %q is not name=pid", kv)
			}
			out[k] = v
		}
	}
	return out
}

// every calls f(k) at start + at(k) for k = 0, 1, ... until stop or at(k) >= until (0: no end but stop).
func every(start time.Time, at func(int) time.Duration, until time.Duration, stop <-chan struct{}, f func(int, time.Time)) {
	for k := 0; ; k++ {
		d := at(k)
		if until > 0 && d >= until {
			return
		}
		t := start.Add(d)
		select {
		case <-stop:
			return
		case <-time.After(time.Until(t)):
		}
		f(k, t)
	}
}

func main() {
	flag.Parse()
	if *namespace == "" || *scheduler == "" || *gangSize < 1 || *rate <= 0 || *warmup >= *window {
		fail("need -namespace, -scheduler, -gang >= 1, -rate > 0 and -warmup < -window")
	}
	pids := parsePids(*cpuPids)
	cfg := restConfig()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("client: %v", err)
	}
	g := &gen{cs: cs, rc: cs.CoreV1().RESTClient(), ctx: context.Background(), sem: make(chan struct{}, *workers),
		pods: map[string]*podRec{}, gangs: map[string]*gangRec{}}
	nodes, err := cs.CoreV1().Nodes().List(g.ctx, metav1.ListOptions{LabelSelector: *nodeSel})
	if err != nil || len(nodes.Items) == 0 {
		fail("list nodes %s: %v (%d)", *nodeSel, err, len(nodes.Items))
	}
	for _, n := range nodes.Items {
		g.nodes = append(g.nodes, n.Name)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(*namespace))
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: g.seen,
		UpdateFunc: func(_, obj any) { g.seen(obj) }})
	stopInf := make(chan struct{})
	factory.Start(stopInf)
	factory.WaitForCacheSync(stopInf)

	// the probe gang: the contender is up and has synced once it binds it
	probeStart := time.Now()
	g.makeGang(*prefix+"-probe", probeStart)
	for !g.gangBound(*prefix + "-probe") {
		if time.Since(probeStart) > *probeWait {
			fail("the probe gang was not bound within %v (is %s running?)", *probeWait, *scheduler)
		}
		time.Sleep(20 * time.Millisecond) // polling the watch's record; the informer has no wait-for-condition
	}
	probeS := time.Since(probeStart).Seconds()

	cpu0, self0 := map[string]float64{}, selfCPU()
	for k, p := range pids {
		cpu0[k] = procCPU(p)
	}
	t0 := time.Now()
	stop := make(chan struct{})
	var bg, reqs sync.WaitGroup
	bg.Add(1)
	go func() { // arrivals
		defer bg.Done()
		every(t0, func(k int) time.Duration { return arrivalAt(k, *gangSize, *rate) }, *window, stop,
			func(k int, at time.Time) {
				reqs.Add(1)
				go func() { defer reqs.Done(); g.makeGang(fmt.Sprintf("%s-%d", *prefix, k), at) }()
			})
	}()
	if *otherRate > 0 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			every(t0, func(k int) time.Duration { return arrivalAt(k, 1, *otherRate) }, 0, stop,
				func(k int, _ time.Time) { g.do(&reqs, func() { g.makeOther(fmt.Sprintf("%s-o%d", *prefix, k)) }) })
		}()
	}
	if *nodeEvery > 0 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			every(t0, func(k int) time.Duration { return time.Duration(k+1) * *nodeEvery }, 0, stop,
				func(k int, _ time.Time) { g.churnNodes(k) })
		}()
	}
	bg.Add(1)
	go func() { // completions
		defer bg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				g.complete(&reqs)
			}
		}
	}()
	windowEnd := t0.Add(*window)
	time.Sleep(time.Until(windowEnd))
	cpuW, selfW := map[string]float64{}, selfCPU()
	for k, p := range pids {
		cpuW[k] = procCPU(p)
	}
	wanted := arrivals(*window, *gangSize, *rate) * *gangSize
	for time.Since(windowEnd) < *drain && !g.allBound(wanted) {
		time.Sleep(50 * time.Millisecond) // polling the watch's record for the last binds
	}
	end := time.Now()
	close(stop)
	bg.Wait()
	reqs.Wait()
	cpu1, self1 := map[string]float64{}, selfCPU()
	for k, p := range pids {
		cpu1[k] = procCPU(p)
	}
	out := g.result(t0, end, probeS)
	out["generator_cpu_s"] = math.Round((self1-self0)*100) / 100
	out["generator_cpu_window_s"] = math.Round((selfW-self0)*100) / 100
	run, win := map[string]float64{}, map[string]float64{}
	for k := range pids {
		run[k] = math.Round((cpu1[k]-cpu0[k])*100) / 100
		win[k] = math.Round((cpuW[k]-cpu0[k])*100) / 100
	}
	out["cpu_s"], out["cpu_window_s"] = run, win
	// the churn nodes still up go with the run
	g.mu.Lock()
	left := g.churn
	g.churn = nil
	g.mu.Unlock()
	for _, n := range left {
		g.removeNode(n.name)
	}
	close(stopInf)
	out["errors"] = g.errs.Load()
	if e := g.firstErr.Load(); e != nil {
		out["first_error"] = e
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func (g *gen) gangBound(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr := g.gangs[name]
	return gr != nil && gr.members > 0 && gr.bound == gr.members
}

// allBound: every contender pod of the window was created (or failed) and is bound.
func (g *gen) allBound(wanted int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.pods {
		if r.bound.IsZero() {
			return false
		}
		n++
	}
	return n+int(g.errs.Load()) >= wanted+*gangSize
}

func (g *gen) result(t0, end time.Time, probeS float64) map[string]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	from, to := t0.Add(*warmup), t0.Add(*window)
	var lat []float64
	created, boundIn, boundRun, unbound := 0, 0, 0, 0
	for _, r := range g.pods {
		if !r.bound.IsZero() && !r.bound.Before(t0) {
			boundRun++
			if r.bound.Before(to) && !r.bound.Before(from) {
				boundIn++
			}
		}
		if r.created.Before(from) || !r.created.Before(to) {
			continue
		}
		created++
		if r.bound.IsZero() {
			unbound++
			lat = append(lat, math.Inf(1))
		} else {
			lat = append(lat, r.bound.Sub(r.created).Seconds())
		}
	}
	span := (*window - *warmup).Seconds()
	return map[string]any{
		"scheduler": *scheduler, "rate": *rate, "gang": *gangSize, "window_s": window.Seconds(),
		"warmup_s": warmup.Seconds(), "lifetime_s": lifetime.Seconds(), "probe_s": math.Round(probeS*1000) / 1000,
		"seconds":         math.Round(end.Sub(t0).Seconds()*100) / 100,
		"drain_s":         math.Round(end.Sub(to).Seconds()*100) / 100,
		"created_in_span": created, "offered_per_s": math.Round(float64(created)/span*10) / 10,
		"bound_in_span": boundIn, "binds_per_s": math.Round(float64(boundIn)/span*10) / 10,
		"bound_in_run": boundRun, "unbound": unbound,
		"p50_s": jsonSeconds(percentile(lat, 0.5)), "p99_s": jsonSeconds(percentile(lat, 0.99)),
		"max_s":             jsonSeconds(percentile(lat, 1)),
		"max_arrival_lag_s": math.Round(time.Duration(g.maxLag.Load()).Seconds()*1000) / 1000,
		"completed_pods":    g.completed.Load(), "nodes_added": g.nodesAdded.Load(),
		"nodes_removed": g.nodesRemoved.Load(), "pods_deleted_with_node": g.orphans.Load(),
		"other_created": g.otherMade.Load(), "other_bound": g.otherBound.Load(),
	}
}
