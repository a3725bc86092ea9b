# offsim plots: feed to gnuplot (5.2 or later), e.g. `gnuplot FILE`.
set encoding utf8

# ---- memory
$memory0 << EOD
0 1 0
0 1.0078125 0
0 1.0703125 0
2 1.0078125 0
2 1.015625 0
2 1.078125 0
4 1.015625 0
4 1.0234375 0
4 1.0859375 0
6 1.0234375 0
6 1.03125 0
6 1.09375 0
9 1.03125 0
9 1.0546875 0
9 1.0859375 0
9 1.1484375 0
12 1.0859375 0
12 1.1484375 0
16 1.0859375 0
16 1.0625 0
16 1.03125 0
16 1.0234375 0
16 1.046875 0
16 1.078125 0
16 1.140625 0
18 1.078125 0
18 1.140625 0
22 1.078125 0
22 1.0546875 0
22 1.0234375 0
22 1.015625 0
22 1.0390625 0
22 1.0703125 0
22 1.1328125 0
24 1.0703125 0
24 1.1328125 0
28 1.0703125 0
28 1.046875 0
28 1.015625 0
28 1.0078125 0
28 1.03125 0
28 1.0625 0
28 1.125 0
30 1.0625 0
30 1.125 0
34 1.0625 0
34 1.0390625 0
34 1.0078125 0
34 1 0
34 1 0
EOD
$peaks << EOD
9 1.1484375 1
EOD
set terminal pngcairo size 1400,779 font 'sans,10' noenhanced background rgb 'white'
set output 'memory.png'
reset
set multiplot title 'tiny uniform model' . "\n" . 'device and host memory over the step' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 1.5
set lmargin at screen 0.07
set rmargin at screen 0.80
set grid lc rgb '#d0d0d0'
set key outside right top reverse Left
set xrange [0:34]
set tmargin at screen 0.9101412067
set bmargin at screen 0.4223363286
set ylabel 'device memory (GiB)'
set format x ''
set yrange [0.95:1.1984375]
plot $memory0 using 1:2 with steps lt 1 title 'checkpoint', \
     $peaks using 1:2:3 with points lc variable pt 7 ps 1.6 notitle, \
     NaN with points lc rgb '#333333' pt 7 ps 1.6 title 'peak'
unset arrow 1
unset key
set format x '%g'
set tmargin at screen 0.3645699615
set bmargin at screen 0.1720154044
set ylabel 'host pinned (GiB)'
set xlabel 'time since the step started (ms)'
set yrange [0:1]
set label 1 'device capacity 80.0 GiB, far above every peak: not drawn, to keep the curves apart' at screen 0.07, screen 0.09499358151 left
set label 2 'checkpoint: device peak 1.15 GiB at 9.00 ms (recompute L3), host peak 0 B' at screen 0.07, screen 0.07188703466 left tc rgb '#4e79a7'
set label 3 '    live at the device peak: static 1.00 GiB + workspace L3 64.0 MiB + saved L3 56.0 MiB + input L0-L3 32.0 MiB' at screen 0.07, screen 0.0487804878 left tc rgb '#4e79a7'
plot $memory0 using 1:3 with steps lt 1 notitle 
unset multiplot
unset output
set terminal svg size 1400,779 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'memory.svg'
reset
set multiplot title 'tiny uniform model' . "\n" . 'device and host memory over the step' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 1.5
set lmargin at screen 0.07
set rmargin at screen 0.80
set grid lc rgb '#d0d0d0'
set key outside right top reverse Left
set xrange [0:34]
set tmargin at screen 0.9101412067
set bmargin at screen 0.4223363286
set ylabel 'device memory (GiB)'
set format x ''
set yrange [0.95:1.1984375]
plot $memory0 using 1:2 with steps lt 1 title 'checkpoint', \
     $peaks using 1:2:3 with points lc variable pt 7 ps 1.6 notitle, \
     NaN with points lc rgb '#333333' pt 7 ps 1.6 title 'peak'
unset arrow 1
unset key
set format x '%g'
set tmargin at screen 0.3645699615
set bmargin at screen 0.1720154044
set ylabel 'host pinned (GiB)'
set xlabel 'time since the step started (ms)'
set yrange [0:1]
set label 1 'device capacity 80.0 GiB, far above every peak: not drawn, to keep the curves apart' at screen 0.07, screen 0.09499358151 left
set label 2 'checkpoint: device peak 1.15 GiB at 9.00 ms (recompute L3), host peak 0 B' at screen 0.07, screen 0.07188703466 left tc rgb '#4e79a7'
set label 3 '    live at the device peak: static 1.00 GiB + workspace L3 64.0 MiB + saved L3 56.0 MiB + input L0-L3 32.0 MiB' at screen 0.07, screen 0.0487804878 left tc rgb '#4e79a7'
plot $memory0 using 1:3 with steps lt 1 notitle 
unset multiplot
unset output

# ---- timeline-checkpoint
$spans << EOD
0 2 2 0
2 4 2 0
4 6 2 0
6 9 2 0
9 12 2 2
12 16 2 1
16 18 2 2
18 22 2 1
22 24 2 2
24 28 2 1
28 30 2 2
30 34 2 1
EOD
set terminal pngcairo size 1400,340 font 'sans,10' noenhanced background rgb 'white'
set output 'timeline-checkpoint.png'
reset
set title 'tiny uniform model' . "\n" . 'timeline of checkpoint: step 34.00 ms = compute 25.00 + recompute 9.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.00' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9, graph 0 to 9, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute'
unset output
set terminal svg size 1400,340 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'timeline-checkpoint.svg'
reset
set title 'tiny uniform model' . "\n" . 'timeline of checkpoint: step 34.00 ms = compute 25.00 + recompute 9.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.00' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9, graph 0 to 9, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute'
unset output
