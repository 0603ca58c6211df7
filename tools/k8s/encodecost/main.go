// encodecost: what the apiserver's own serializers spend encoding one pod as a watch event, in JSON (as
// volcano-py's watches ask) and in protobuf (as kube-scheduler, kube-controller-manager and kwok ask). The
// apiserver encodes each event once per encoding its watchers use (its watch cache's cachingObject), so a JSON
// watcher among protobuf ones costs it one JSON encoding of every pod event. Measurement only; not in any test.
//
//	go run ./encodecost -pod /tmp/pod.json [-n 200000]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

func main() {
	podFile := flag.String("pod", "/tmp/pod.json", "a pod as the apiserver returns it (JSON)")
	n := flag.Int("n", 200000, "encodings per serializer")
	flag.Parse()
	raw, err := os.ReadFile(*podFile)
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		panic(err)
	}
	pod.TypeMeta = metav1.TypeMeta{}
	js := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{})
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	codecs := map[string]runtime.Encoder{"json": js, "protobuf": pb}
	for round := 0; round < 3; round++ {
		for _, name := range []string{"json", "protobuf", "json", "protobuf"} {
			enc := codecs[name]
			var buf bytes.Buffer
			start := time.Now()
			size := 0
			for i := 0; i < *n; i++ {
				buf.Reset()
				// the event as the apiserver frames it: the object encoded, then the WatchEvent around it
				var obj bytes.Buffer
				if err := enc.Encode(pod, &obj); err != nil {
					panic(err)
				}
				ev := &metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: obj.Bytes()}}
				if err := enc.Encode(ev, &buf); err != nil {
					panic(err)
				}
				size = buf.Len()
			}
			per := time.Since(start) / time.Duration(*n)
			fmt.Printf("round %d %-8s %6d bytes  %v per event\n", round, name, size, per)
		}
	}
}
