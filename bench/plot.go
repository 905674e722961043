package main

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotThroughput draws jobs/s and p50/p99 latency against worker concurrency, side
// by side, into a PNG.
func plotThroughput(levels []level, path string) error {
	rate, drain, lat := make(plotter.XYs, len(levels)), make(plotter.XYs, len(levels)), make([]plotter.XYs, 2)
	lat[0], lat[1] = make(plotter.XYs, len(levels)), make(plotter.XYs, len(levels))
	for i, l := range levels {
		rate[i] = plotter.XY{X: float64(l.Workers), Y: l.JobsPerSecond}
		drain[i] = plotter.XY{X: float64(l.Workers), Y: l.DrainPerSecond}
		lat[0][i] = plotter.XY{X: float64(l.Workers), Y: float64(l.P50.Milliseconds())}
		lat[1][i] = plotter.XY{X: float64(l.Workers), Y: float64(l.P99.Milliseconds())}
	}
	p1 := plot.New()
	p1.Title.Text = "Throughput (local stack)"
	p1.X.Label.Text = "worker concurrency"
	p1.Y.Label.Text = "jobs per second"
	if err := plotutil.AddLinePoints(p1, "draining a full queue", drain, "under load (8 producers)", rate); err != nil {
		return err
	}
	p2 := plot.New()
	p2.Title.Text = "Enqueue-to-succeeded latency under load"
	p2.X.Label.Text = "worker concurrency"
	p2.Y.Label.Text = "milliseconds"
	if err := plotutil.AddLinePoints(p2, "p50", lat[0], "p99", lat[1]); err != nil {
		return err
	}
	for _, p := range []*plot.Plot{p1, p2} {
		p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 1, Label: "1"}, {Value: 2, Label: "2"}, {Value: 4, Label: "4"}, {Value: 8, Label: "8"}})
		p.Y.Min = 0
		p.Legend.Top = true
	}
	img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 8, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{{p1, p2}}, tiles, dc)
	p1.Draw(canvases[0][0])
	p2.Draw(canvases[0][1])
	w, err := createFile(path)
	if err != nil {
		return err
	}
	defer w.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
