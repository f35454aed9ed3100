/* stage/contracts/common.h: descriptor attributes that more than one
 * stream family carries. Producers set them with cbf_port_desc_set_attr and
 * consumers read them with cbf_port_desc_get_attr by these names only, so a
 * misspelt name fails to compile instead of reading as absent. */
#ifndef CBF_CONTRACTS_COMMON_H
#define CBF_CONTRACTS_COMMON_H

#define CBF_ATTR_ADC_SAMPLE_RATE "adc_sample_rate"     /* digitiser samples per second */
#define CBF_ATTR_ANTENNA "antenna"                     /* which antenna a one-antenna stream is */
#define CBF_ATTR_N_ANTS "n_ants"                       /* antennas in a multi-antenna stream */
#define CBF_ATTR_CHANNELS "channels"                   /* channels of the whole band */
#define CBF_ATTR_BANDWIDTH "bandwidth"                 /* Hz the channels cover */
#define CBF_ATTR_CENTRE_FREQUENCY "centre_frequency"   /* Hz (narrowband: the ddc's centre) */
#define CBF_ATTR_DECIMATION "decimation"               /* digitiser samples per sample (narrowband) */
#define CBF_ATTR_SPECTRA_PER_HEAP "spectra_per_heap"
#define CBF_ATTR_SAMPLES_BETWEEN_SPECTRA "samples_between_spectra"  /* digitiser samples */
#define CBF_ATTR_BITS "bits"                           /* sample width of the stream or its source */

#endif
