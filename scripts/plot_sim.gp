# Draws chorus-sim's time against size, one line per algorithm plus the lower
# bound, log-log, as SVG. chorus-sim --plot runs it as
#   gnuplot -e "datafile='d'; outfile='o.svg'; plottitle='t'; nblocks=k" plot_sim.gp
# The data file holds k blocks (separated by two blank lines), each headed by
# "size <name>" and then rows "<bytes> <microseconds>"; the last block is the
# lower bound.
set terminal svg size 900,600 dynamic enhanced font "sans,12" background rgb "white"
set output outfile
set title plottitle noenhanced
set logscale xy
set format x "%.0s%cB"
set xlabel "size M (bytes)"
set ylabel "time (us)"
set key top left noenhanced
set grid
plot for [i=0:nblocks-2] datafile index i using 1:2 with linespoints title columnheader(2), \
     datafile index (nblocks-1) using 1:2 with lines dashtype 2 lw 2 lc rgb "black" title columnheader(2)
