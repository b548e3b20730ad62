package watch

import (
	"testing"
	"testing/synctest"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// listingHandler records each change with whether Listing reported a list.
func listingHandler(inf **Informer[thing], rec *recordingHandler) Handler[thing] {
	from := func() string {
		if (*inf).Listing() {
			return "list "
		}
		return "watch "
	}
	return Handler[thing]{
		OnAdd:    func(o *thing) { rec.add(from() + "add " + o.Name) },
		OnUpdate: func(_, o *thing) { rec.add(from() + "update " + o.Name) },
		OnDelete: func(o *thing) { rec.add(from() + "delete " + o.Name) },
	}
}

// Listing reports a list for the changes of the first list and of a
// relist, and not for those of the watch, nor between changes.
func TestInformerListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		rec := &recordingHandler{}
		var inf *Informer[thing]
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src, Handler: listingHandler(&inf, rec)})
		defer func() { cancel(); <-done }()

		src.expectList(t, "0", page("10", "", obj("a", "5"), obj("b", "6")), nil)
		st := src.expectWatch(t, "10", nil)
		st.send(t, k8sapi.Added, obj("c", "11"))
		st.send(t, k8sapi.Modified, obj("a", "12"))
		st.end(goneEvent())
		src.expectList(t, "", page("30", "", obj("a", "20"), obj("c", "11")), nil)
		st = src.expectWatch(t, "30", nil)
		st.send(t, k8sapi.Deleted, obj("c", "31"))
		synctest.Wait()
		const want = "list add a; list add b; watch add c; watch update a; " +
			"list update a; list delete b; watch delete c"
		if got := rec.take(); got != want {
			t.Errorf("changes:\n%s\nwant\n%s", got, want)
		}
		if inf.Listing() {
			t.Error("Listing between changes")
		}
	})
}

// The initial events of a streaming list are a list's changes.
func TestInformerListingStreaming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		rec := &recordingHandler{}
		var inf *Informer[thing]
		inf, cancel, done := startInformer(t, Config[thing]{Source: src, Handler: listingHandler(&inf, rec)})
		defer func() { cancel(); <-done }()

		c := <-src.watches
		st := newScriptedStream()
		c.reply <- watchReply{stream: st}
		st.send(t, k8sapi.Added, obj("a", "3"))
		st.send(t, k8sapi.Bookmark, bookmark("9", true))
		st.send(t, k8sapi.Added, obj("b", "10"))
		synctest.Wait()
		if got := rec.take(); got != "list add a; watch add b" {
			t.Errorf("changes %q, want the initial event from a list, the next from the watch", got)
		}
	})
}
